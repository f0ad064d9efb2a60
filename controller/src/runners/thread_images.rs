//! The images people shared in a thread, shown to its Coder: when the Coder's model takes
//! images, the task (the first user message, which every call of the run sends again) goes
//! to the model with the thread's images as image parts, added by the controller on the way
//! out. The runner's conversation and what the store keeps of it stay text: the images live
//! only in the model request, read from the thread's attachments directory, which only the
//! controller writes.

use std::path::Path;

use codebutler_agent::conversation::{ChatMessage, ContentPart, UserContent};

use crate::domain::{FileKind, ThreadKey, image_part};
use crate::gateway::Gateway;
use crate::layout::Layout;
use crate::store::Store;

/// The most images given to the Coder (the thread's first ones).
pub const MAX_IMAGES: usize = 8;

/// A thread's images as the Coder's model gets them.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ThreadImages {
    /// The names they were shared with.
    names: Vec<String>,
    /// Each image as a part of the request.
    parts: Vec<ContentPart>,
}

impl ThreadImages {
    /// The images shared in `thread` when `model` takes images; empty otherwise, or when
    /// none was shared (a file that cannot be read is logged and left out).
    pub async fn load(
        gateway: &Gateway,
        model: &str,
        store: &Store,
        repo: &Path,
        thread: &ThreadKey,
    ) -> Self {
        let files = match store.thread_kept_files(thread).await {
            Ok(files) => files,
            Err(e) => {
                tracing::warn!(thread = %thread, "read the thread's shared files for the Coder: {e}");
                return Self::default();
            }
        };
        let images: Vec<_> = files
            .into_iter()
            .filter(|f| FileKind::of(&f.mimetype) == Some(FileKind::Image))
            .take(MAX_IMAGES)
            .collect();
        if images.is_empty() || !gateway.sees_images(model).await {
            return Self::default();
        }
        let dir = Layout::new(repo).thread_attachments_path(thread);
        let mut out = Self::default();
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
        out
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
