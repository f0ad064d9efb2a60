//! Files people share on a Slack message: what the message says of each (name, type, size,
//! where Slack serves it), what kind of content it is for a model, and what became of it.
//! Plain data; the Slack download is [`crate::slack::files`], the model's view of it
//! [`crate::pm::attachments`].

/// A file as the message event describes it (`files[]`): nothing here was checked yet, and
/// the name is the sharer's, never a path the controller uses.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SharedFile {
    /// Slack's file id (`F…`).
    pub id: String,
    /// The name it was shared with.
    pub name: String,
    /// Its MIME type as Slack says it.
    pub mimetype: String,
    /// `url_private_download`: served only with the bot token.
    pub url: String,
}

/// What a model can make of a file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FileKind {
    /// PNG, JPEG, GIF or WebP: an image part of the model request.
    Image,
    /// Text (logs, CSV, JSON, diffs, source): text in the model request.
    Text,
    /// An audio or video clip (a voice note): its transcript becomes the message's text.
    Audio,
    /// A PDF: its text, extracted when it is fetched, is text in the model request.
    Pdf,
}

/// The image types a model request may carry.
const IMAGE_TYPES: [&str; 4] = ["image/png", "image/jpeg", "image/gif", "image/webp"];

/// Video types taken as voice notes (Slack's video clips); every `audio/*` type is one too.
const CLIP_VIDEO_TYPES: [&str; 3] = ["video/mp4", "video/quicktime", "video/webm"];

/// MIME types that are text though not `text/*`.
const TEXT_TYPES: [&str; 9] = [
    "application/json",
    "application/xml",
    "application/x-yaml",
    "application/yaml",
    "application/x-sh",
    "application/x-diff",
    "application/x-patch",
    "application/javascript",
    "application/toml",
];

impl FileKind {
    /// The kind of a file of MIME type `mimetype`, or `None` for a type CodeButler does not
    /// take (it is refused with a line in the thread).
    pub fn of(mimetype: &str) -> Option<FileKind> {
        let base = mimetype
            .split(';')
            .next()
            .unwrap_or_default()
            .trim()
            .to_ascii_lowercase();
        if IMAGE_TYPES.contains(&base.as_str()) {
            Some(FileKind::Image)
        } else if (base.starts_with("text/") && base != "text/html")
            || TEXT_TYPES.contains(&base.as_str())
        {
            Some(FileKind::Text)
        } else if base == "application/pdf" {
            Some(FileKind::Pdf)
        } else if base.starts_with("audio/") || CLIP_VIDEO_TYPES.contains(&base.as_str()) {
            Some(FileKind::Audio)
        } else {
            None
        }
    }

    /// The image MIME type a data URI of this file should name (Slack's, normalised).
    pub fn image_type(mimetype: &str) -> &'static str {
        let base = mimetype.split(';').next().unwrap_or_default().trim();
        IMAGE_TYPES
            .iter()
            .find(|t| t.eq_ignore_ascii_case(base))
            .copied()
            .unwrap_or("image/png")
    }
}

/// An image part of a model request: `bytes` as a data URI of their image type.
pub fn image_part(mimetype: &str, bytes: &[u8]) -> codebutler_agent::conversation::ContentPart {
    use base64::Engine as _;
    let data = base64::engine::general_purpose::STANDARD.encode(bytes);
    codebutler_agent::conversation::ContentPart::image_url(format!(
        "data:{};base64,{data}",
        FileKind::image_type(mimetype)
    ))
}

/// A shared file as the store keeps it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoredFile {
    /// Where it sits on its message (0 for the first).
    pub position: u32,
    pub file: SharedFile,
    pub state: FileState,
}

/// What became of a shared file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FileState {
    /// Not fetched yet.
    Pending,
    /// Fetched: its bytes are in the thread's attachments directory under this name, which
    /// the controller chose.
    Stored(String),
    /// Not kept, for this reason (as the thread was told).
    Refused(String),
    /// A voice note whose transcript is now its message's text (its bytes are not kept).
    Transcribed,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_come_from_the_mime_type() {
        assert_eq!(FileKind::of("image/png"), Some(FileKind::Image));
        assert_eq!(FileKind::of("IMAGE/JPEG"), Some(FileKind::Image));
        assert_eq!(
            FileKind::of("text/plain; charset=utf-8"),
            Some(FileKind::Text)
        );
        assert_eq!(FileKind::of("text/csv"), Some(FileKind::Text));
        assert_eq!(FileKind::of("application/json"), Some(FileKind::Text));
        assert_eq!(FileKind::of("application/zip"), None);
        // What Slack answers a request without the token with: never a file's text.
        assert_eq!(FileKind::of("text/html"), None);
        assert_eq!(FileKind::of("image/svg+xml"), None);
        assert_eq!(FileKind::of("audio/webm"), Some(FileKind::Audio));
        assert_eq!(FileKind::of("video/mp4"), Some(FileKind::Audio));
        assert_eq!(FileKind::of("video/x-msvideo"), None);
        assert_eq!(FileKind::of("application/pdf"), Some(FileKind::Pdf));
        assert_eq!(FileKind::of(""), None);
        assert_eq!(FileKind::image_type("image/JPEG"), "image/jpeg");
    }
}
