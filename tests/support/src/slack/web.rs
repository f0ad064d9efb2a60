//! The Web API's HTTP face: a call's parameters (query, JSON, form or multipart), its token,
//! its answer (`ok`, Slack's `error`, 429s) and the record of it; [`METHODS`] hands each
//! known method to what implements it.

use std::sync::Arc;
use std::time::Instant;

use axum::body::{Body, Bytes};
use axum::extract::{FromRequest, Path, Query, Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Map, Value, json};

use super::error::ApiError;
use super::files::{self, multipart_boundary, parse_multipart};
use super::shared_files;
use super::{APP_TOKEN, BOT_TOKEN, Call, Inner, SlackState, StallPoint};
use super::{access, assistant, channels, chat, history, home, people, reactions, socket_mode};

pub(super) type Params = Map<String, Value>;

pub(super) fn slack_json(body: Value) -> Response {
    let mut resp = (StatusCode::OK, body.to_string()).into_response();
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json; charset=utf-8"),
    );
    resp
}

pub(super) fn slack_error(error: &str) -> Value {
    json!({"ok": false, "error": error})
}

async fn parse_params(uri: &Uri, headers: &HeaderMap, body: Bytes) -> Result<Params, ApiError> {
    let mut params = Params::new();
    if uri.query().is_some() {
        let Query(pairs) = Query::<Vec<(String, String)>>::try_from_uri(uri)
            .map_err(|_| ApiError::InvalidArguments)?;
        for (k, v) in pairs {
            params.insert(k, Value::String(v));
        }
    }
    if body.is_empty() {
        return Ok(params);
    }
    let content_type = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_ascii_lowercase();
    if content_type.starts_with("application/json") {
        match serde_json::from_slice::<Value>(&body) {
            Ok(Value::Object(obj)) => params.extend(obj),
            _ => return Err(ApiError::InvalidJson),
        }
    } else if content_type.starts_with("application/x-www-form-urlencoded") {
        let req = Request::builder()
            .method(Method::POST)
            .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
            .body(Body::from(body))
            .map_err(|_| ApiError::InvalidFormData)?;
        let axum::Form(pairs) = axum::Form::<Vec<(String, String)>>::from_request(req, &())
            .await
            .map_err(|_| ApiError::InvalidFormData)?;
        for (k, v) in pairs {
            params.insert(k, Value::String(v));
        }
    } else if content_type.starts_with("multipart/form-data") {
        let boundary = multipart_boundary(&content_type).ok_or(ApiError::InvalidFormData)?;
        for part in parse_multipart(&body, &boundary).ok_or(ApiError::InvalidFormData)? {
            if part.filename.is_none() {
                params.insert(
                    part.name,
                    Value::String(String::from_utf8_lossy(&part.data).into_owned()),
                );
            }
        }
    } else {
        return Err(ApiError::InvalidFormData);
    }
    Ok(params)
}

fn bearer(headers: &HeaderMap) -> Option<String> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    value
        .strip_prefix("Bearer ")
        .map(|t| t.trim().to_owned())
        .filter(|t| !t.is_empty())
}

/// A string parameter; numbers are rendered, empty strings count as missing.
pub(super) fn str_param(params: &Params, key: &str) -> Option<String> {
    match params.get(key)? {
        Value::String(s) if !s.is_empty() => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

/// A structured parameter: JSON bodies carry it as a value, form bodies as a JSON string.
pub(super) fn json_param(params: &Params, key: &str) -> Option<Value> {
    match params.get(key)? {
        Value::String(s) if s.is_empty() => None,
        Value::String(s) => serde_json::from_str(s).ok(),
        Value::Null => None,
        v => Some(v.clone()),
    }
}

pub(super) async fn api_handler(
    State(inner): State<Arc<Inner>>,
    Path(method): Path<String>,
    http_method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let at = Instant::now();
    let parsed = parse_params(&uri, &headers, body).await;
    let (params, parse_error) = match parsed {
        Ok(p) => (p, None),
        Err(e) => (Params::new(), Some(e)),
    };
    let token = bearer(&headers).or_else(|| str_param(&params, "token"));
    let call = ApiCall {
        method,
        http_method: http_method.to_string(),
        params,
        parse_error,
        token,
        at,
    };
    let (response, stall) = answer_call(&inner, call);
    if let Some(stall) = stall {
        stall.hold().await;
    }
    response
}

/// A Web API request as the handler parsed it.
struct ApiCall {
    method: String,
    http_method: String,
    params: Params,
    parse_error: Option<ApiError>,
    token: Option<String>,
    at: Instant,
}

/// Records and answers one call under the lock; returns the answer and the stall armed for
/// it, if any.
fn answer_call(inner: &Inner, call: ApiCall) -> (Response, Option<Arc<StallPoint>>) {
    let ApiCall {
        method,
        http_method,
        params,
        parse_error,
        token,
        at,
    } = call;
    let mut st = inner.lock();
    let record = |st: &mut SlackState, error: Option<&str>| {
        st.calls.push(Call {
            method: method.clone(),
            http_method: http_method.clone(),
            params: Value::Object(params.clone()),
            at,
            error: error.map(str::to_owned),
        });
    };

    if let Some((remaining, retry_after)) = st.rate_limits.get_mut(&method)
        && *remaining > 0
    {
        *remaining -= 1;
        let retry_after = *retry_after;
        record(&mut st, Some("ratelimited"));
        let mut resp = slack_json(slack_error("ratelimited"));
        *resp.status_mut() = StatusCode::TOO_MANY_REQUESTS;
        resp.headers_mut().insert(
            header::RETRY_AFTER,
            HeaderValue::from_str(&retry_after.to_string()).expect("retry-after header"),
        );
        return (resp, None);
    }

    if let Some(error) = st.refused.get(&method).cloned() {
        record(&mut st, Some(&error));
        return (slack_json(slack_error(&error)), None);
    }

    let result = match (implementation(&method), parse_error) {
        (None, _) => Err(ApiError::UnknownMethod),
        (Some(_), Some(e)) => Err(e),
        (Some(implementation), None) => {
            let expected = if method == "apps.connections.open" {
                APP_TOKEN
            } else {
                BOT_TOKEN
            };
            match token.as_deref() {
                None => Err(ApiError::NotAuthed),
                Some(t) if t == expected => {
                    let app = method == "apps.connections.open";
                    if let Some(refused) = access::refusal(&st, &method, &params, app) {
                        let error = refused["error"].as_str().unwrap_or_default().to_owned();
                        record(&mut st, Some(&error));
                        return (slack_json(refused), None);
                    }
                    implementation(inner, &mut st, &params)
                }
                Some(t) if t == APP_TOKEN || t == BOT_TOKEN => Err(ApiError::NotAllowedTokenType),
                Some(_) => Err(ApiError::InvalidAuth),
            }
        }
    };
    // Like Slack, every answer to a call with a known token names its scopes.
    let granted = token
        .as_deref()
        .and_then(|t| access::granted_header(&st, t));
    let (mut response, stall) = match result {
        Ok(body) => {
            record(&mut st, None);
            (slack_json(body), st.stalls.remove(&method))
        }
        Err(error) => {
            let error = error.to_string();
            record(&mut st, Some(&error));
            (slack_json(slack_error(&error)), None)
        }
    };
    if let Some(granted) = granted.and_then(|g| HeaderValue::from_str(&g).ok()) {
        response.headers_mut().insert("x-oauth-scopes", granted);
    }
    (response, stall)
}

/// What implements one Web API method: it gets the server, the fake's state (locked for the
/// whole call) and the call's parameters, and answers Slack's JSON or its error.
type Implementation = fn(&Inner, &mut SlackState, &Params) -> Result<Value, ApiError>;

/// The Web API methods the fake implements, each with what implements it; any other answers
/// `unknown_method`.
const METHODS: &[(&str, Implementation)] = &[
    ("auth.test", |_, _, _| Ok(people::auth_test())),
    ("apps.connections.open", socket_mode::connections_open),
    ("chat.getPermalink", |_, st, params| {
        people::permalink(st, params)
    }),
    ("conversations.info", |_, st, params| {
        access::conversations_info(st, params)
    }),
    ("conversations.list", |_, st, params| {
        channels::list(st, params)
    }),
    ("conversations.create", |_, st, params| {
        channels::create(st, params)
    }),
    ("conversations.join", |_, st, params| {
        channels::join(st, params)
    }),
    ("users.info", |_, st, params| people::users_info(st, params)),
    ("chat.postMessage", chat::post_message),
    ("chat.update", chat::update),
    ("assistant.threads.setStatus", assistant::set_status),
    ("chat.startStream", assistant::start_stream),
    ("chat.appendStream", assistant::append_stream),
    ("chat.stopStream", assistant::stop_stream),
    ("conversations.replies", |_, st, params| {
        history::replies(st, params)
    }),
    ("conversations.history", |_, st, params| {
        history::history(st, params)
    }),
    ("views.publish", home::publish),
    ("reactions.add", reactions::add),
    ("reactions.remove", reactions::remove),
    ("files.getUploadURLExternal", files::get_upload_url),
    ("files.completeUploadExternal", files::complete_upload),
    ("files.info", shared_files::files_info),
];

/// The implementation of `method`, if the fake has one.
fn implementation(name: &str) -> Option<Implementation> {
    METHODS
        .iter()
        .find(|(known, _)| *known == name)
        .map(|(_, implementation)| *implementation)
}

/// A required string parameter, or `invalid_arguments`.
pub(super) fn need(params: &Params, key: &str) -> Result<String, ApiError> {
    str_param(params, key).ok_or(ApiError::InvalidArguments)
}
