//! The files upload flow: `files.getUploadURLExternal` (a file id and its upload URL), the
//! upload URL (the bytes arrive as a raw body or `multipart/form-data`, their length checked
//! against what was announced) and `files.completeUploadExternal` (the file shared, a
//! `file_share` message in the channel).

use std::sync::Arc;
use std::time::Instant;

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use super::error::ApiError;
use super::web::{Params, json_param, need, str_param};
use super::{
    APP_ID, BOT_ID, BOT_USER_ID, Call, Inner, PendingFile, SlackState, Upload, channel_type,
};

pub(super) async fn upload_handler(
    State(inner): State<Arc<Inner>>,
    Path(file_id): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let content_type = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    let content: Option<Vec<u8>> = if content_type
        .to_ascii_lowercase()
        .starts_with("multipart/form-data")
    {
        multipart_boundary(&content_type)
            .and_then(|b| parse_multipart(&body, &b))
            .and_then(|parts| {
                let idx = parts
                    .iter()
                    .position(|p| p.filename.is_some() || p.name == "file")?;
                parts.into_iter().nth(idx).map(|p| p.data)
            })
    } else {
        Some(body.to_vec())
    };
    let mut st = inner.lock();
    st.calls.push(Call {
        method: "upload".into(),
        http_method: "POST".into(),
        params: json!({"file_id": file_id, "content_type": content_type, "bytes": body.len()}),
        at: Instant::now(),
        error: None,
    });
    let Some(content) = content else {
        st.violations.push(format!(
            "upload {file_id}: multipart body without a file part"
        ));
        return (StatusCode::BAD_REQUEST, "invalid multipart body").into_response();
    };
    let SlackState {
        pending_files,
        violations,
        ..
    } = &mut *st;
    let Some(pending) = pending_files.get_mut(&file_id) else {
        violations.push(format!("upload to unknown file id {file_id}"));
        return (StatusCode::NOT_FOUND, "file not found").into_response();
    };
    if content.len() != pending.length {
        violations.push(format!(
            "upload {file_id} ({}): {} bytes uploaded but files.getUploadURLExternal said length={}",
            pending.filename,
            content.len(),
            pending.length
        ));
    }
    let len = content.len();
    pending.content = Some(content);
    let mut resp = (StatusCode::OK, format!("OK - {len}")).into_response();
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    resp
}

/// `files.getUploadURLExternal`: a file id and the upload URL its bytes go to.
pub(super) fn get_upload_url(
    inner: &Inner,
    st: &mut SlackState,
    params: &Params,
) -> Result<Value, ApiError> {
    let filename = need(params, "filename")?;
    let length: usize = need(params, "length")?
        .parse()
        .map_err(|_| ApiError::InvalidArguments)?;
    let file_id = format!("F0FAKE{:06}", st.next_id());
    st.pending_files.insert(
        file_id.clone(),
        PendingFile {
            filename,
            length,
            content: None,
        },
    );
    Ok(json!({
        "ok": true,
        "upload_url": format!("{}/upload/{file_id}", inner.base()),
        "file_id": file_id,
    }))
}

/// `files.completeUploadExternal`: the uploaded files shared (a `file_share` message in the
/// channel, when one is named).
pub(super) fn complete_upload(
    _: &Inner,
    st: &mut SlackState,
    params: &Params,
) -> Result<Value, ApiError> {
    let files = json_param(params, "files")
        .and_then(|f| f.as_array().cloned())
        .filter(|f| !f.is_empty())
        .ok_or(ApiError::InvalidArguments)?;
    let channel = str_param(params, "channel_id").or_else(|| {
        str_param(params, "channels")
            .and_then(|c| c.split(',').next().map(str::to_owned))
            .filter(|c| !c.is_empty())
    });
    let thread_ts = str_param(params, "thread_ts");
    let initial_comment = str_param(params, "initial_comment");
    let mut done = Vec::new();
    for file in &files {
        let id = file
            .get("id")
            .and_then(Value::as_str)
            .ok_or(ApiError::InvalidArguments)?;
        let title = file.get("title").and_then(Value::as_str).map(str::to_owned);
        match st.pending_files.get(id) {
            Some(p) if p.content.is_some() => done.push((id.to_owned(), title)),
            _ => return Err(ApiError::FileNotFound),
        }
    }
    let mut out = Vec::new();
    let mut shared = Vec::new();
    for (id, title) in done {
        let pending = st.pending_files.remove(&id).expect("checked above");
        let title = title.unwrap_or_else(|| pending.filename.clone());
        let content = pending.content.unwrap_or_default();
        out.push(json!({"id": id, "name": pending.filename, "title": title}));
        shared.push(json!({
            "id": id,
            "name": pending.filename,
            "title": title,
            "size": content.len(),
            "user": BOT_USER_ID,
        }));
        st.uploads.push(Upload {
            file_id: id,
            filename: pending.filename,
            title,
            content: String::from_utf8_lossy(&content).into_owned(),
            bytes: content.clone(),
            channel: channel.clone(),
            thread_ts: thread_ts.clone(),
            initial_comment: initial_comment.clone(),
        });
    }
    if let Some(channel) = &channel {
        // Sharing into a channel posts a file_share message, which the bot sees too.
        let ts = st.next_ts();
        let mut event = json!({
            "type": "message",
            "subtype": "file_share",
            "channel": channel,
            "channel_type": channel_type(channel),
            "text": initial_comment.clone().unwrap_or_default(),
            "files": shared,
            "upload": true,
            "user": BOT_USER_ID,
            "bot_id": BOT_ID,
            "app_id": APP_ID,
            "display_as_bot": false,
            "ts": ts,
            "event_ts": ts,
        });
        if let Some(thread_ts) = &thread_ts {
            event["thread_ts"] = json!(thread_ts);
        }
        st.emit_event(event);
    }
    Ok(json!({"ok": true, "files": out}))
}

// ---------------------------------------------------------------------------------------------
// multipart/form-data (minimal)
// ---------------------------------------------------------------------------------------------

pub(super) struct Part {
    pub(super) name: String,
    pub(super) filename: Option<String>,
    pub(super) data: Vec<u8>,
}

pub(super) fn multipart_boundary(content_type: &str) -> Option<String> {
    content_type.split(';').find_map(|p| {
        let p = p.trim();
        let (k, v) = p.split_once('=')?;
        k.trim()
            .eq_ignore_ascii_case("boundary")
            .then(|| v.trim().trim_matches('"').to_owned())
    })
}

fn find(haystack: &[u8], needle: &[u8], from: usize) -> Option<usize> {
    if from > haystack.len() {
        return None;
    }
    haystack[from..]
        .windows(needle.len())
        .position(|w| w == needle)
        .map(|p| p + from)
}

pub(super) fn parse_multipart(body: &[u8], boundary: &str) -> Option<Vec<Part>> {
    let delim = format!("--{boundary}").into_bytes();
    let mut parts = Vec::new();
    let mut pos = find(body, &delim, 0)? + delim.len();
    loop {
        if body.get(pos..pos + 2) == Some(b"--") {
            return Some(parts);
        }
        // Skip the CRLF after the delimiter.
        pos = find(body, b"\r\n", pos)? + 2;
        let headers_end = find(body, b"\r\n\r\n", pos)?;
        let headers = String::from_utf8_lossy(&body[pos..headers_end]).into_owned();
        let data_start = headers_end + 4;
        let mut next_delim = delim.clone();
        next_delim.splice(0..0, *b"\r\n");
        let data_end = find(body, &next_delim, data_start)?;
        let mut name = String::new();
        let mut filename = None;
        for line in headers.lines() {
            let Some((k, v)) = line.split_once(':') else {
                continue;
            };
            if !k.trim().eq_ignore_ascii_case("content-disposition") {
                continue;
            }
            for attr in v.split(';') {
                if let Some((ak, av)) = attr.trim().split_once('=') {
                    let av = av.trim().trim_matches('"').to_owned();
                    match ak.trim() {
                        "name" => name = av,
                        "filename" => filename = Some(av),
                        _ => {}
                    }
                }
            }
        }
        parts.push(Part {
            name,
            filename,
            data: body[data_start..data_end].to_vec(),
        });
        pos = data_end + next_delim.len();
    }
}

// ---------------------------------------------------------------------------------------------
// Socket Mode
// ---------------------------------------------------------------------------------------------
