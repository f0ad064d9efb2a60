//! Voice notes: an audio or video clip shared on a message ([`FileKind::Audio`]) is heard
//! before the PM reads the message. Slack's own transcript is taken when it has finished
//! one (`files.info`); otherwise the clip is fetched (the bot token, the size limit) and
//! transcribed ([`crate::gateway::transcribe`]). The transcript becomes the message's text
//! from then on, and the thread is shown what was heard, as data.
//!
//! Nothing is stored here: [`Attachments::hear`] says what was heard, and the caller
//! records it (the message's new text, each clip's state) in one commit with the
//! "heard" line, so a restart neither hears a clip again nor says it twice. A clip that
//! cannot be heard is refused with the reason, which the thread's line about the
//! message's files says once.

use tokio_util::sync::CancellationToken;

use crate::domain::{FileKind, FileState, IncomingMessage, StoredFile};
use crate::gateway::transcribe::{Clip, TranscribeError};
use crate::slack::files::FetchRefused;
use crate::store::{Store, StoreError};

use super::attachments::Attachments;

/// The most characters of a transcript the thread is shown (the PM reads it whole).
pub const MAX_SHOWN_CHARS: usize = 3_000;

/// What hearing a message's voice notes found.
#[derive(Clone, Debug, PartialEq)]
pub struct Heard {
    /// The message's text from now on: what was typed, then each transcript.
    pub text: String,
    /// Each clip's position and what became of it.
    pub files: Vec<(u32, FileState)>,
    /// The transcripts, in order, for the thread's line.
    pub transcripts: Vec<String>,
}

/// Why the voice notes could not be heard (the message is tried again later).
#[derive(Debug, thiserror::Error)]
pub enum HearError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("cancelled")]
    Cancelled,
}

/// Why one clip was not heard.
#[derive(Debug, thiserror::Error)]
enum ClipRefused {
    #[error("{0}")]
    Fetch(#[from] FetchRefused),
    #[error("could not transcribe it: {0}")]
    Transcribe(#[from] TranscribeError),
    #[error("a message takes at most {0} files (`attachments.maxFiles`)")]
    TooMany(usize),
}

impl Attachments {
    /// Hears `msg`'s voice notes not heard yet; `None` when it has none.
    pub async fn hear(
        &self,
        store: &Store,
        msg: &IncomingMessage,
        cancel: &CancellationToken,
    ) -> Result<Option<Heard>, HearError> {
        let clips: Vec<StoredFile> = store
            .message_files(msg)
            .await?
            .into_iter()
            .filter(|f| {
                f.state == FileState::Pending
                    && FileKind::of(&f.file.mimetype) == Some(FileKind::Audio)
            })
            .collect();
        if clips.is_empty() {
            return Ok(None);
        }
        let mut heard = Heard {
            text: msg.text.clone(),
            files: Vec::new(),
            transcripts: Vec::new(),
        };
        for clip in &clips {
            match self.hear_one(msg, clip, cancel).await {
                Ok(transcript) => {
                    heard.text = match heard.text.trim_end() {
                        "" => transcript.clone(),
                        said => format!("{said}\n\n{transcript}"),
                    };
                    heard.transcripts.push(transcript);
                    heard.files.push((clip.position, FileState::Transcribed));
                }
                Err(ClipRefused::Transcribe(TranscribeError::Cancelled)) => {
                    return Err(HearError::Cancelled);
                }
                Err(reason) => {
                    tracing::warn!(thread = %msg.thread(), "voice note {}: {reason}", clip.file.id);
                    heard
                        .files
                        .push((clip.position, FileState::Refused(reason.to_string())));
                }
            }
        }
        Ok(Some(heard))
    }

    /// One clip's transcript: Slack's if finished, else the transcription service's.
    async fn hear_one(
        &self,
        msg: &IncomingMessage,
        clip: &StoredFile,
        cancel: &CancellationToken,
    ) -> Result<String, ClipRefused> {
        if clip.position as usize >= self.limits.max_files {
            return Err(ClipRefused::TooMany(self.limits.max_files));
        }
        let info = self.fetcher.clip(&clip.file.id).await?;
        if let Some(transcript) = info.transcript {
            tracing::info!(
                tag = "PM",
                "thread {} → voice note heard from Slack's transcript",
                msg.thread()
            );
            return Ok(transcript);
        }
        let bytes = self
            .fetcher
            .fetch(&clip.file.url, self.limits.max_bytes())
            .await?;
        let clip = Clip {
            name: format!(
                "{}-{}.{}",
                msg.ts.replace('.', "_"),
                clip.position,
                clip_extension(&clip.file.mimetype)
            ),
            mimetype: clip.file.mimetype.clone(),
            bytes,
            duration_ms: info.duration_ms,
        };
        let text = self
            .transcriber
            .transcribe(&msg.thread(), &msg.user, clip, cancel)
            .await?;
        tracing::info!(
            tag = "PM",
            "thread {} → voice note transcribed by {}",
            msg.thread(),
            self.transcriber.model()
        );
        Ok(text)
    }
}

/// The thread's line for what was heard: `🎙️ heard: …` per transcript, each cut past
/// [`MAX_SHOWN_CHARS`] and escaped, so a transcript is shown as said and never pings
/// (`<!channel>` stays text).
pub fn heard_line(transcripts: &[String]) -> String {
    transcripts
        .iter()
        .map(|t| {
            let one_line: String = t.split_whitespace().collect::<Vec<_>>().join(" ");
            let mut shown: String = one_line.chars().take(MAX_SHOWN_CHARS).collect();
            if one_line.chars().count() > MAX_SHOWN_CHARS {
                shown.push('…');
            }
            format!("🎙️ heard: {}", crate::slack::format::escape_text(&shown))
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The extension the transcription service is told, from the MIME type alone (Whisper
/// reads the container from it).
fn clip_extension(mimetype: &str) -> &'static str {
    let base = mimetype.split(';').next().unwrap_or_default().trim();
    match base.to_ascii_lowercase().as_str() {
        "audio/mpeg" | "audio/mp3" => "mp3",
        "audio/mp4" | "audio/x-m4a" | "audio/m4a" | "audio/aac" => "m4a",
        "audio/wav" | "audio/x-wav" | "audio/wave" => "wav",
        "audio/ogg" | "audio/opus" => "ogg",
        "audio/flac" | "audio/x-flac" => "flac",
        "video/mp4" => "mp4",
        "video/quicktime" => "mov",
        _ => "webm",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_was_heard_is_shown_inert_and_bounded() {
        let line = heard_line(&["hey <!channel> fix\n<@U1> the *login*_now".into()]);
        assert_eq!(
            line,
            "🎙️ heard: hey &lt;!channel&gt; fix &lt;@U1&gt; the *login*_now"
        );
        let long = heard_line(&["a".repeat(MAX_SHOWN_CHARS + 10)]);
        assert!(long.ends_with("a…"), "{long}");
        assert_eq!(clip_extension("audio/webm; codecs=opus"), "webm");
        assert_eq!(clip_extension("video/quicktime"), "mov");
    }
}
