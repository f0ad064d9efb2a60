//! `POST /v1/audio/transcriptions` of the OpenAI-compatible API, as OpenAI's Whisper
//! answers it: a multipart form with `model`, `file` and `response_format`. The transcript
//! is derived from the audio bytes received: a test's clip ([`fake_clip`]) carries its
//! length and its words after a small header, and the fake answers those words, so a
//! client that sends no audio (or the wrong bytes) gets no transcript. Bytes without the
//! header are refused as OpenAI refuses a file it cannot decode. Every request is recorded
//! ([`FakeModel::transcriptions`]) with what it carried, the key included.

use std::sync::Arc;

use axum::extract::{Multipart, State};
use axum::http::{HeaderMap, header};
use axum::response::{IntoResponse, Response};
use serde_json::json;

use super::{FakeModel, Inner, auth_problem, openrouter_error};

/// The header of a test's audio clip.
const CLIP_HEADER: &[u8] = b"FAKEAUDIO ";

/// The bytes of an audio clip `seconds` long in which `words` are said.
pub fn fake_clip(seconds: u32, words: &str) -> Vec<u8> {
    let mut bytes = CLIP_HEADER.to_vec();
    bytes.extend_from_slice(format!("{seconds}\n{words}").as_bytes());
    bytes
}

/// One transcription request as the fake received it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Transcription {
    /// The `model` field.
    pub model: String,
    /// The `response_format` field (`""` when absent).
    pub response_format: String,
    /// The `file` part's file name and content type.
    pub file_name: String,
    pub content_type: String,
    /// The `file` part's bytes.
    pub bytes: Vec<u8>,
    /// The `Authorization` header as sent.
    pub authorization: Option<String>,
    /// The HTTP status the fake answered.
    pub status: u16,
}

impl FakeModel {
    /// Every transcription request, in arrival order.
    pub fn transcriptions(&self) -> Vec<Transcription> {
        self.inner.lock().transcriptions.clone()
    }

    /// Makes every transcription request fail with `status` (OpenAI's error body).
    pub fn fail_transcriptions(&self, status: u16) {
        self.inner.lock().transcription_failure = Some(status);
    }
}

/// A clip's length and words, if `bytes` is one.
fn read_clip(bytes: &[u8]) -> Option<(u32, String)> {
    let rest = bytes.strip_prefix(CLIP_HEADER)?;
    let text = std::str::from_utf8(rest).ok()?;
    let (seconds, words) = text.split_once('\n')?;
    Some((seconds.trim().parse().ok()?, words.trim().to_owned()))
}

pub(super) async fn transcriptions(
    State(inner): State<Arc<Inner>>,
    headers: HeaderMap,
    mut form: Multipart,
) -> Response {
    let mut request = Transcription {
        authorization: headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned),
        ..Transcription::default()
    };
    let mut malformed = false;
    loop {
        let field = match form.next_field().await {
            Ok(Some(field)) => field,
            Ok(None) => break,
            Err(_) => {
                malformed = true;
                break;
            }
        };
        let name = field.name().unwrap_or_default().to_owned();
        match name.as_str() {
            "file" => {
                request.file_name = field.file_name().unwrap_or_default().to_owned();
                request.content_type = field.content_type().unwrap_or_default().to_owned();
                match field.bytes().await {
                    Ok(bytes) => request.bytes = bytes.to_vec(),
                    Err(_) => malformed = true,
                }
            }
            "model" => request.model = field.text().await.unwrap_or_default(),
            "response_format" => request.response_format = field.text().await.unwrap_or_default(),
            _ => {}
        }
    }
    let mut st = inner.lock();
    let expected = st.api_key.clone();
    let answer = if let Some(problem) =
        auth_problem(request.authorization.as_deref(), expected.as_deref())
    {
        openrouter_error(401, problem)
    } else if let Some(status) = st.transcription_failure {
        openrouter_error(status, "transcription failed (scripted)")
    } else if malformed || request.model.is_empty() || request.file_name.is_empty() {
        openrouter_error(400, "a multipart form with `model` and `file` is required")
    } else {
        match read_clip(&request.bytes) {
            None => openrouter_error(400, "Invalid file format."),
            Some((seconds, words)) if request.response_format == "verbose_json" => {
                axum::Json(json!({"task": "transcribe", "language": "english",
                    "duration": seconds, "text": words, "segments": []}))
                .into_response()
            }
            Some((_, words)) => axum::Json(json!({"text": words})).into_response(),
        }
    };
    request.status = answer.status().as_u16();
    st.transcriptions.push(request);
    answer
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_clip_says_its_words() {
        assert_eq!(
            read_clip(&fake_clip(12, "fix the login")),
            Some((12, "fix the login".into()))
        );
        assert_eq!(read_clip(b"RIFF....WAVE"), None);
    }
}
