//! `FakeImages`: OpenAI's images API as the Artist uses it — `POST /v1/images/generations`
//! (JSON: `model`, `prompt`, `size`, `n`) and `POST /v1/images/edits` (`multipart/form-data`
//! with the same fields and the base image as the `image` part) — answering
//! `{"data": [{"b64_json": …}]}` with a real PNG derived from the request: a 1×1 image whose
//! `tEXt` chunk carries the prompt, and for an edit also a digest of the base
//! image's bytes it received ([`ImageDigest`]), so a product that sends no base, or a
//! different one, gets a different image. Every request is recorded (with the base image's
//! bytes) and one without `Authorization: Bearer <key>` gets OpenAI's 401.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use serde_json::{Value, json};

/// The key the fake accepts unless a test sets another.
pub const OPENAI_KEY: &str = "sk-openai-test-key";

/// One request the fake received.
#[derive(Clone, Debug)]
pub struct ImageCall {
    /// `generations` or `edits`.
    pub endpoint: String,
    pub model: String,
    pub prompt: String,
    pub size: String,
    /// The base image's bytes of an edit.
    pub image: Option<Vec<u8>>,
    /// The PNG the fake answered (none for a refused request).
    pub answered: Option<Vec<u8>>,
}

#[derive(Default)]
struct ImagesState {
    calls: Vec<ImageCall>,
    violations: Vec<String>,
}

struct Inner {
    addr: SocketAddr,
    key: String,
    state: Mutex<ImagesState>,
}

impl Inner {
    fn lock(&self) -> MutexGuard<'_, ImagesState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The fake; the server stops when it is dropped.
pub struct FakeImages {
    inner: Arc<Inner>,
    server: tokio::task::JoinHandle<()>,
}

impl Drop for FakeImages {
    fn drop(&mut self) {
        self.server.abort();
    }
}

impl FakeImages {
    /// Starts the fake on `127.0.0.1:0`, accepting [`OPENAI_KEY`].
    pub async fn start() -> FakeImages {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let inner = Arc::new(Inner {
            addr: listener.local_addr().unwrap(),
            key: OPENAI_KEY.to_owned(),
            state: Mutex::new(ImagesState::default()),
        });
        let app = Router::new()
            .route("/v1/images/generations", post(generations))
            .route("/v1/images/edits", post(edits))
            .with_state(inner.clone());
        let server = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        FakeImages { inner, server }
    }

    /// `http://127.0.0.1:PORT/v1`, for `openai.baseUrl`.
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.inner.addr)
    }

    /// Every request, in order.
    pub fn calls(&self) -> Vec<ImageCall> {
        self.inner.lock().calls.clone()
    }

    /// Requests OpenAI would have refused, with why. Tests assert it is empty.
    pub fn violations(&self) -> Vec<String> {
        self.inner.lock().violations.clone()
    }
}

/// The PNG the fake draws for `prompt` (and an edit's `base`): what its `tEXt` chunk says.
pub fn image_text(prompt: &str, base: Option<&[u8]>) -> String {
    match base {
        Some(base) => format!("edit of {:016x}: {prompt}", fnv(base)),
        None => format!("drawn: {prompt}"),
    }
}

/// The PNG the fake answers for `prompt` and `base`: a 1×1 grey image with the text of
/// [`image_text`] in a `tEXt` chunk (keyword `Description`).
pub fn fake_png(prompt: &str, base: Option<&[u8]>) -> Vec<u8> {
    let mut png = vec![0x89, b'P', b'N', b'G', b'\r', b'\n', 0x1a, b'\n'];
    // 1×1, 8-bit greyscale.
    chunk(&mut png, b"IHDR", &[0, 0, 0, 1, 0, 0, 0, 1, 8, 0, 0, 0, 0]);
    let mut text = b"Description\0".to_vec();
    text.extend_from_slice(image_text(prompt, base).as_bytes());
    chunk(&mut png, b"tEXt", &text);
    // A zlib stream with one stored block holding the scanline: filter 0, one grey pixel.
    let raw = [0u8, 0x80];
    let mut idat = vec![0x78, 0x01, 0x01, 0x02, 0x00, 0xfd, 0xff];
    idat.extend_from_slice(&raw);
    idat.extend_from_slice(&adler32(&raw).to_be_bytes());
    chunk(&mut png, b"IDAT", &idat);
    chunk(&mut png, b"IEND", &[]);
    png
}

fn chunk(png: &mut Vec<u8>, kind: &[u8; 4], data: &[u8]) {
    png.extend_from_slice(&u32::try_from(data.len()).unwrap().to_be_bytes());
    let mut crc_input = kind.to_vec();
    crc_input.extend_from_slice(data);
    png.extend_from_slice(&crc_input);
    png.extend_from_slice(&crc32(&crc_input).to_be_bytes());
}

fn crc32(bytes: &[u8]) -> u32 {
    let mut crc = 0xffff_ffffu32;
    for &b in bytes {
        crc ^= u32::from(b);
        for _ in 0..8 {
            crc = if crc & 1 == 1 {
                (crc >> 1) ^ 0xedb8_8320
            } else {
                crc >> 1
            };
        }
    }
    !crc
}

fn adler32(bytes: &[u8]) -> u32 {
    let (mut a, mut b) = (1u32, 0u32);
    for &x in bytes {
        a = (a + u32::from(x)) % 65_521;
        b = (b + a) % 65_521;
    }
    (b << 16) | a
}

/// FNV-1a, a digest of an edit's base image small enough to print.
fn fnv(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

fn openai_error(status: StatusCode, message: &str) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, "application/json")],
        json!({"error": {"message": message, "type": "invalid_request_error"}}).to_string(),
    )
        .into_response()
}

fn authorized(inner: &Inner, headers: &HeaderMap) -> bool {
    headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v == format!("Bearer {}", inner.key))
}

/// Answers a checked request: records it with the PNG drawn.
fn answer(inner: &Inner, mut call: ImageCall) -> Response {
    use base64_encode as encode;
    let png = fake_png(&call.prompt, call.image.as_deref());
    call.answered = Some(png.clone());
    inner.lock().calls.push(call);
    (
        [(header::CONTENT_TYPE, "application/json")],
        json!({"created": 1_700_000_000, "data": [{"b64_json": encode(&png)}]}).to_string(),
    )
        .into_response()
}

/// Checks what OpenAI checks of the fields every request has; `Err` is its refusal.
fn check_fields(endpoint: &str, fields: &Value) -> Result<ImageCall, String> {
    let text = |name: &str| fields[name].as_str().map(str::to_owned);
    let model = text("model").ok_or("`model` is required")?;
    let prompt = text("prompt").ok_or("`prompt` is required")?;
    if prompt.trim().is_empty() {
        return Err("`prompt` is empty".into());
    }
    let size = text("size").unwrap_or_else(|| "auto".into());
    if !["1024x1024", "1024x1536", "1536x1024", "auto"].contains(&size.as_str()) {
        return Err(format!("invalid size {size}"));
    }
    Ok(ImageCall {
        endpoint: endpoint.into(),
        model,
        prompt,
        size,
        image: None,
        answered: None,
    })
}

async fn generations(State(inner): State<Arc<Inner>>, headers: HeaderMap, body: Bytes) -> Response {
    if !authorized(&inner, &headers) {
        inner
            .lock()
            .violations
            .push("generations without the key".into());
        return openai_error(StatusCode::UNAUTHORIZED, "Incorrect API key provided");
    }
    let Ok(fields) = serde_json::from_slice::<Value>(&body) else {
        return openai_error(StatusCode::BAD_REQUEST, "the body is not JSON");
    };
    match check_fields("generations", &fields) {
        Ok(call) => answer(&inner, call),
        Err(why) => {
            inner.lock().violations.push(format!("generations: {why}"));
            openai_error(StatusCode::BAD_REQUEST, &why)
        }
    }
}

async fn edits(State(inner): State<Arc<Inner>>, headers: HeaderMap, body: Bytes) -> Response {
    if !authorized(&inner, &headers) {
        inner.lock().violations.push("edits without the key".into());
        return openai_error(StatusCode::UNAUTHORIZED, "Incorrect API key provided");
    }
    let boundary = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split("boundary=").nth(1))
        .map(|b| b.trim_matches('"').to_owned());
    let Some(boundary) = boundary else {
        inner.lock().violations.push("edits: not multipart".into());
        return openai_error(StatusCode::BAD_REQUEST, "expected multipart/form-data");
    };
    let mut fields = serde_json::Map::new();
    let mut image = None;
    for (name, data) in multipart_parts(&body, &boundary) {
        if name == "image" {
            image = Some(data);
        } else {
            fields.insert(
                name,
                Value::String(String::from_utf8_lossy(&data).into_owned()),
            );
        }
    }
    let Some(image) = image else {
        inner
            .lock()
            .violations
            .push("edits without an image".into());
        return openai_error(StatusCode::BAD_REQUEST, "`image` is required");
    };
    match check_fields("edits", &Value::Object(fields)) {
        Ok(mut call) => {
            call.image = Some(image);
            answer(&inner, call)
        }
        Err(why) => {
            inner.lock().violations.push(format!("edits: {why}"));
            openai_error(StatusCode::BAD_REQUEST, &why)
        }
    }
}

/// The parts of a `multipart/form-data` body: each part's name and its bytes, exactly.
fn multipart_parts(body: &[u8], boundary: &str) -> Vec<(String, Vec<u8>)> {
    let delimiter = format!("--{boundary}").into_bytes();
    let mut parts = Vec::new();
    let mut starts = Vec::new();
    let mut i = 0;
    while i + delimiter.len() <= body.len() {
        if body[i..].starts_with(&delimiter) {
            starts.push(i);
            i += delimiter.len();
        } else {
            i += 1;
        }
    }
    for pair in starts.windows(2) {
        let part = &body[pair[0] + delimiter.len()..pair[1]];
        let part = part.strip_prefix(b"\r\n").unwrap_or(part);
        let part = part.strip_suffix(b"\r\n").unwrap_or(part);
        let Some(split) = part.windows(4).position(|w| w == b"\r\n\r\n") else {
            continue;
        };
        let head = String::from_utf8_lossy(&part[..split]);
        let Some(name) = head
            .split("name=\"")
            .nth(1)
            .and_then(|rest| rest.split('"').next())
        else {
            continue;
        };
        parts.push((name.to_owned(), part[split + 4..].to_vec()));
    }
    parts
}

/// Standard base64, padded.
pub(crate) fn base64_encode(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, &b)| n | u32::from(b) << (16 - 8 * i));
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(ALPHABET[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}
