//! Files people share in a message, as Slack serves them: a test shares a file
//! ([`FakeSlack::user_message_with_files`]) and the fake sends the `file_share` message
//! event with `files[]`, each with a `url_private_download` on the fake's own address. That
//! URL answers the file's bytes (its MIME type, its `Content-Length`) only to
//! `Authorization: Bearer <the bot token>`; without it, or with another token, it answers
//! 200 with an HTML sign-in page, exactly as Slack does, so a client that forgets the token
//! or does not check the content type takes the page for the file. The bytes are streamed in
//! chunks and every chunk handed to the connection is counted, so a test can see how much of
//! a file the client read before it stopped ([`FakeSlack::downloads`]).

use std::sync::Arc;

use axum::body::{Body, Bytes};
use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use super::{BOT_TOKEN, FakeSlack, Inner, Sent, TEAM_ID};

/// Size of the chunks a shared file is streamed in.
const CHUNK: usize = 64 * 1024;

/// A file a person shares in a test.
#[derive(Clone, Debug)]
pub struct SharedFile {
    /// The name it is shared with (anything: `../x` included).
    pub name: String,
    pub mimetype: String,
    /// Its bytes.
    pub bytes: Arc<Vec<u8>>,
    /// A clip's transcript Slack finished (`files.info`'s `transcription`), if any.
    pub transcript: Option<String>,
    /// A clip's length (`duration_ms`), if Slack says it.
    pub duration_ms: Option<u64>,
}

impl SharedFile {
    /// A file named `name` of type `mimetype` holding `bytes`.
    pub fn new(name: &str, mimetype: &str, bytes: impl Into<Vec<u8>>) -> Self {
        Self {
            name: name.to_owned(),
            mimetype: mimetype.to_owned(),
            bytes: Arc::new(bytes.into()),
            transcript: None,
            duration_ms: None,
        }
    }

    /// A voice note recorded in Slack (`subtype: slack_audio`), `duration_ms` long, of
    /// type `mimetype` holding `bytes`, not transcribed by Slack (yet).
    pub fn clip(name: &str, mimetype: &str, bytes: impl Into<Vec<u8>>, duration_ms: u64) -> Self {
        Self {
            duration_ms: Some(duration_ms),
            ..Self::new(name, mimetype, bytes)
        }
    }

    /// This clip with Slack's finished transcript `text`.
    pub fn transcribed_by_slack(self, text: &str) -> Self {
        Self {
            transcript: Some(text.to_owned()),
            ..self
        }
    }

    /// The file object Slack describes it with (the event's `files[]`, `files.info`).
    fn object(&self, id: &str, user: &str, url: &str) -> Value {
        let mut object = json!({
            "id": id,
            "name": self.name,
            "title": self.name,
            "mimetype": self.mimetype,
            "filetype": self.name.rsplit('.').next().unwrap_or("binary"),
            "size": self.bytes.len(),
            "user": user,
            "url_private": url.replace("/download/", "/"),
            "url_private_download": url,
        });
        if let Some(duration_ms) = self.duration_ms {
            let video = self.mimetype.starts_with("video/");
            object["subtype"] = json!(if video { "slack_video" } else { "slack_audio" });
            object["duration_ms"] = json!(duration_ms);
            object["transcription"] = match &self.transcript {
                Some(text) => json!({"status": "complete", "locale": "en-US",
                    "preview": {"content": text, "has_more": false}}),
                None => json!({"status": "processing"}),
            };
        }
        object
    }
}

/// One request for a shared file's download URL.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Download {
    pub file_id: String,
    /// Whether it carried the bot token (and so got the file, not the sign-in page).
    pub authorized: bool,
    /// How many of the file's bytes the fake handed to the connection.
    pub bytes_sent: usize,
}

/// A shared file as the fake keeps it.
#[derive(Clone, Debug)]
pub(super) struct Served {
    file: SharedFile,
    /// The file object its message described it with.
    object: Value,
}

/// `files.info`: the file object of a shared file (its transcript as Slack has it now),
/// `file_not_found` for any other id.
pub(super) fn files_info(
    _: &Inner,
    st: &mut super::SlackState,
    params: &super::web::Params,
) -> Result<Value, super::error::ApiError> {
    let id = super::web::need(params, "file")?;
    let served = st
        .shared
        .get(&id)
        .ok_or(super::error::ApiError::FileNotFound)?;
    st.files_info.push(id);
    Ok(json!({"ok": true, "file": served.object.clone()}))
}

/// What Slack answers a file URL without the right token: a sign-in page, status 200.
const SIGN_IN_PAGE: &str = "<!DOCTYPE html><html><head><title>Slack</title></head><body>\
<h1>Sign in to Fake Workspace</h1><form action=\"/signin\"></form></body></html>";

impl FakeSlack {
    /// A person's message with `files` shared on it (`subtype: file_share`, `files[]`),
    /// `text` possibly empty, in `thread_ts`'s thread or at the top level.
    pub fn user_message_with_files(
        &self,
        channel: &str,
        user: &str,
        text: &str,
        thread_ts: Option<&str>,
        files: &[SharedFile],
    ) -> Sent {
        let entries: Vec<Value> = {
            let mut st = self.inner.lock();
            files
                .iter()
                .map(|file| {
                    let id = format!("F0SHARED{:05}", st.next_id());
                    let url = format!(
                        "{}/files-pri/{TEAM_ID}-{id}/download/{}",
                        self.inner.base(),
                        url_segment(&file.name)
                    );
                    let object = file.object(&id, user, &url);
                    st.shared.insert(
                        id,
                        Served {
                            file: file.clone(),
                            object: object.clone(),
                        },
                    );
                    object
                })
                .collect()
        };
        self.user_message_with_file_entries(channel, user, text, thread_ts, entries)
    }

    /// A person's message with `files[]` entries as given (a URL elsewhere, a missing
    /// field): what a test needs to show the client checks them.
    pub fn user_message_with_file_entries(
        &self,
        channel: &str,
        user: &str,
        text: &str,
        thread_ts: Option<&str>,
        entries: Vec<Value>,
    ) -> Sent {
        let mut st = self.inner.lock();
        let ts = st.next_ts();
        let mut event = json!({
            "type": "message",
            "subtype": "file_share",
            "channel": channel,
            "channel_type": super::channel_type(channel),
            "user": user,
            "text": text,
            "upload": true,
            "display_as_bot": false,
            "files": entries,
            "ts": ts,
            "event_ts": ts,
            "team": TEAM_ID,
        });
        if let Some(thread_ts) = thread_ts {
            event["thread_ts"] = json!(thread_ts);
        }
        st.emit_event(event)
    }

    /// Every request for a shared file's download URL, in order.
    pub fn downloads(&self) -> Vec<Download> {
        self.inner.lock().downloads.clone()
    }

    /// The file ids `files.info` was asked about, in order.
    pub fn files_info_requests(&self) -> Vec<String> {
        self.inner.lock().files_info.clone()
    }
}

/// A file name as one URL path segment.
fn url_segment(name: &str) -> String {
    name.bytes()
        .map(|b| match b {
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'-' | b'_' | b'.' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// `GET /files-pri/<team>-<id>/download/<name>`: the file to the bot token, a sign-in page
/// to anyone else.
pub(super) async fn download_handler(
    State(inner): State<Arc<Inner>>,
    Path((team_file, _name)): Path<(String, String)>,
    headers: HeaderMap,
) -> Response {
    let file_id = team_file
        .strip_prefix(&format!("{TEAM_ID}-"))
        .unwrap_or_default()
        .to_owned();
    let authorized = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v == format!("Bearer {BOT_TOKEN}"));
    let served = {
        let mut st = inner.lock();
        let index = st.downloads.len();
        st.downloads.push(Download {
            file_id: file_id.clone(),
            authorized,
            bytes_sent: 0,
        });
        st.shared.get(&file_id).cloned().map(|s| (s, index))
    };
    if !authorized {
        let mut resp = (StatusCode::OK, SIGN_IN_PAGE).into_response();
        resp.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("text/html; charset=utf-8"),
        );
        return resp;
    }
    let Some((served, index)) = served else {
        return (StatusCode::NOT_FOUND, "file not found").into_response();
    };
    let bytes = served.file.bytes.clone();
    let len = bytes.len();
    let counter = inner.clone();
    let chunks = futures::stream::iter((0..len.div_ceil(CHUNK)).map(move |i| {
        let chunk = &bytes[i * CHUNK..((i + 1) * CHUNK).min(len)];
        let mut st = counter.lock();
        st.downloads[index].bytes_sent += chunk.len();
        Ok::<_, std::io::Error>(Bytes::copy_from_slice(chunk))
    }));
    let mut resp = Response::new(Body::from_stream(chunks));
    let headers = resp.headers_mut();
    if let Ok(value) = HeaderValue::from_str(&served.file.mimetype) {
        headers.insert(header::CONTENT_TYPE, value);
    }
    headers.insert(header::CONTENT_LENGTH, HeaderValue::from(len));
    resp
}
