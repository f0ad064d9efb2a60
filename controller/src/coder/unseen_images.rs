//! The thread's line when the Coder's model cannot see the thread's images. The controller
//! adds a thread's images to the Coder's model requests only when the model takes images
//! ([`crate::runners::thread_images`]); otherwise the Coder reads only their names, and the
//! people in the thread are told so once per run — when the run starts, or when an image
//! reaches it while it runs — with the configured models that can see them, in the PM's
//! wording ([`crate::pm::attachments::cannot_see_images`]).

use super::SlackCoder;
use crate::domain::{FileKind, ThreadKey};
use crate::pm::attachments::{cannot_see_images, shown_name};
use crate::runners::thread_images::MAX_IMAGES;
use crate::slack::effects::Effects;
use crate::store::Change;

impl SlackCoder {
    /// Says in `thread`, once for the run `run_id` (the step `coder-images:<run id>`), that
    /// the Coder's model cannot see the thread's images and which configured models can,
    /// when the thread has images and the model takes none. A failure is logged: the run
    /// goes on without the line.
    pub async fn say_unseen_images(&self, thread: &ThreadKey, run_id: &str) {
        let images: Vec<String> = match self.store.thread_kept_files(thread).await {
            Ok(files) => files
                .into_iter()
                .filter(|f| FileKind::of(&f.mimetype) == Some(FileKind::Image))
                .take(MAX_IMAGES)
                .map(|f| format!("`{}`", shown_name(&f.name)))
                .collect(),
            Err(e) => {
                tracing::warn!(thread = %thread, "read the thread's shared files for the Coder: {e}");
                return;
            }
        };
        let model = &self.supervisor.limits().model;
        let gateway = &self.pm.gateway;
        if images.is_empty() || gateway.sees_images(model).await {
            return;
        }
        let step = format!("coder-images:{run_id}");
        match self.store.step_done(thread, &step).await {
            Ok(false) => {}
            Ok(true) => return,
            Err(e) => {
                tracing::warn!(thread = %thread, "read whether run {run_id} was told about images: {e}");
                return;
            }
        }
        let image_models = self.pm.attachments.image_models(gateway).await;
        let line = cannot_see_images("Coder", model, &images, &image_models, "coder.model");
        let changes = [Change::StepDone {
            thread,
            step: &step,
        }];
        let effects = Effects::new(thread).reply(&line, "");
        if let Err(e) = self.outbox.commit(&changes, &effects).await {
            tracing::error!(thread = %thread, "say that the Coder's model cannot see images: {e}");
        }
    }
}
