//! The images people shared in a thread, shown to its Coder: when the Coder's model takes
//! images, the task (the first user message, which every call of the run sends again) goes
//! to the model with the thread's images as image parts, added by the controller on the way
//! out. The runner's conversation and what the store keeps of it stay text: the images live
//! only in the model request, read from the thread's attachments directory, which only the
//! controller writes.
//!
//! The run's hub holds the images it read and checks the thread's stored files before each
//! call: an image shared while the Coder runs is read then, and reaches the model on its
//! next request; otherwise nothing is read again.

use std::path::Path;
use std::sync::Arc;

use codebutler_agent::conversation::{ChatMessage, ContentPart, UserContent};

use crate::domain::{FileKind, ThreadKey, image_part};
use crate::gateway::Gateway;
use crate::layout::Layout;
use crate::store::{KeptFile, Store};

/// The most images given to the Coder (the thread's first ones).
pub const MAX_IMAGES: usize = 8;

/// A thread's images as the Coder's model gets them.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ThreadImages {
    /// The names the images were stored under when these were read: the thread's images
    /// then, whether or not the model takes them.
    stored: Vec<String>,
    /// The names they were shared with.
    names: Vec<String>,
    /// Each image as a part of the request.
    parts: Vec<ContentPart>,
}

impl ThreadImages {
    /// The images shared in `thread` now, when `model` takes images (none otherwise):
    /// `current` itself when the thread's images are still those it was read from, else
    /// read again. A failure to read the store keeps `current`; a file that cannot be read
    /// is logged and left out.
    pub async fn refreshed(
        current: Arc<Self>,
        gateway: &Gateway,
        model: &str,
        store: &Store,
        repo: &Path,
        thread: &ThreadKey,
    ) -> Arc<Self> {
        let images: Vec<KeptFile> = match store.thread_kept_files(thread).await {
            Ok(files) => files
                .into_iter()
                .filter(|f| FileKind::of(&f.mimetype) == Some(FileKind::Image))
                .take(MAX_IMAGES)
                .collect(),
            Err(e) => {
                tracing::warn!(thread = %thread, "read the thread's shared files for the Coder: {e}");
                return current;
            }
        };
        let stored: Vec<String> = images.iter().map(|i| i.stored_as.clone()).collect();
        if stored == current.stored {
            return current;
        }
        let mut out = Self {
            stored,
            ..Self::default()
        };
        if images.is_empty() || !gateway.sees_images(model).await {
            return Arc::new(out);
        }
        let dir = Layout::new(repo).thread_attachments_path(thread);
        for image in images {
            match std::fs::read(dir.join(&image.stored_as)) {
                Ok(bytes) => {
                    out.names.push(image.name);
                    out.parts.push(image_part(&image.mimetype, &bytes));
                }
                Err(e) => {
                    tracing::warn!(thread = %thread, "read the shared image {}: {e}", image.stored_as)
                }
            }
        }
        Arc::new(out)
    }

    /// `messages` with the images added to the first user message (as parts after its
    /// text, which names them); unchanged when there are none or that message has parts
    /// already.
    pub fn attach(&self, messages: &[ChatMessage]) -> Vec<ChatMessage> {
        let mut out = messages.to_vec();
        if self.parts.is_empty() {
            return out;
        }
        let Some(slot) = out.iter_mut().find(|m| {
            matches!(
                m,
                ChatMessage::User {
                    content: UserContent::Text(_)
                }
            )
        }) else {
            return out;
        };
        let ChatMessage::User {
            content: UserContent::Text(text),
        } = slot
        else {
            return out;
        };
        let names: Vec<String> = self
            .names
            .iter()
            .map(|n| format!("`{}`", one_line(n)))
            .collect();
        let mut parts = vec![ContentPart::text(format!(
            "{text}\n\n[images shared in the Slack thread, attached below: {}]",
            names.join(", ")
        ))];
        parts.extend(self.parts.iter().cloned());
        *slot = ChatMessage::user_parts(parts);
        out
    }
}

/// A shared name on one line, bounded, without backticks.
fn one_line(name: &str) -> String {
    name.chars()
        .filter(|c| !c.is_control() && *c != '`')
        .take(120)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_images_follow_the_first_user_messages_text() {
        let images = ThreadImages {
            stored: vec!["1_2-0.png".into()],
            names: vec!["bug\n`x`.png".into()],
            parts: vec![ContentPart::image_url("data:image/png;base64,AAAA")],
        };
        let messages = vec![
            ChatMessage::system("You are the Coder."),
            ChatMessage::user("Fix the button."),
            ChatMessage::assistant_text("Done."),
            ChatMessage::user("Also the icon."),
        ];
        let sent = images.attach(&messages);
        assert_eq!(
            sent[1],
            ChatMessage::user_parts(vec![
                ContentPart::text(
                    "Fix the button.\n\n[images shared in the Slack thread, attached below: `bugx.png`]"
                ),
                ContentPart::image_url("data:image/png;base64,AAAA"),
            ])
        );
        assert_eq!(sent[3], messages[3]);
        assert_eq!(ThreadImages::default().attach(&messages), messages);
    }
}
