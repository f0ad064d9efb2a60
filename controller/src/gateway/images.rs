//! OpenAI's images API, for the Artist (`artist.provider` `openai`): `POST
//! <openai.baseUrl>/images/generations` draws from a prompt, `POST /images/edits` (multipart,
//! the base image as its `image` part) redraws an image a person shared. Both answer the
//! image as base64 (`b64_json`); the bytes are checked to be a PNG within [`MAX_IMAGE_BYTES`]
//! before anything keeps them.
//!
//! The answer carries no cost: what an image costs is OpenAI's published price per image
//! ([`super::pricing::image_price`]), which the caller records as the Artist's usage. The key
//! (`openai.apiKey` or `OPENAI_API_KEY`) goes in the `Authorization` header only; no error
//! names it.

use std::time::Duration;

use base64::Engine as _;
use serde::Deserialize;

use crate::secret::Secret;

/// The largest image kept (decoded bytes).
pub const MAX_IMAGE_BYTES: usize = 20 * 1024 * 1024;
/// How long one images call may take: drawing is slow.
pub(crate) const IMAGES_TIMEOUT: Duration = Duration::from_secs(180);
/// The first bytes of every PNG file.
pub const PNG_SIGNATURE: [u8; 8] = [0x89, b'P', b'N', b'G', b'\r', b'\n', 0x1a, b'\n'];

/// An image to draw.
#[derive(Clone, Copy, Debug)]
pub struct ImageRequest<'a> {
    pub model: &'a str,
    pub prompt: &'a str,
    /// `<width>x<height>`.
    pub size: &'a str,
    /// `low`, `medium` or `high`.
    pub quality: &'a str,
    /// The image to edit (a PNG, JPEG or WebP file's bytes and its type), if any.
    pub base: Option<BaseImage<'a>>,
}

/// The image an edit starts from.
#[derive(Clone, Copy, Debug)]
pub struct BaseImage<'a> {
    pub mimetype: &'a str,
    pub bytes: &'a [u8],
}

/// An images call that failed.
#[derive(Debug, thiserror::Error)]
pub enum ImagesError {
    #[error("no OpenAI key: set `openai.apiKey` or OPENAI_API_KEY to draw images")]
    NoKey,
    #[error("the images API answered HTTP {status}: {message}")]
    Http { status: u16, message: String },
    #[error("the images API could not be reached: {0}")]
    Transport(String),
    #[error("the images API took longer than {}s", IMAGES_TIMEOUT.as_secs())]
    Timeout,
    #[error("the images API's answer is not an image: {0}")]
    Decode(String),
    #[error("the image drawn is larger than {} MB", MAX_IMAGE_BYTES / (1024 * 1024))]
    TooLarge,
}

/// OpenAI's images API.
#[derive(Clone, Debug)]
pub struct ImagesApi {
    http: reqwest::Client,
    base_url: String,
    api_key: Option<Secret>,
}

#[derive(Deserialize)]
struct ImagesResponse {
    #[serde(default)]
    data: Vec<ImageData>,
}

#[derive(Deserialize)]
struct ImageData {
    b64_json: Option<String>,
}

#[derive(Deserialize)]
struct ErrorResponse {
    error: ErrorBody,
}

#[derive(Deserialize)]
struct ErrorBody {
    message: String,
}

impl ImagesApi {
    /// The API at `base_url` (`openai.baseUrl`), with `api_key` if there is one.
    pub fn new(base_url: &str, api_key: Option<Secret>) -> Result<Self, ImagesError> {
        crate::tls::ensure_provider();
        let http = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(10))
            .user_agent(concat!("codebutler/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| ImagesError::Transport(e.without_url().to_string()))?;
        Ok(Self {
            http,
            base_url: base_url.trim_end_matches('/').to_owned(),
            api_key,
        })
    }

    /// Whether it has a key to draw with.
    pub fn has_key(&self) -> bool {
        self.api_key.is_some()
    }

    /// Draws `request`'s image (an edit when it has a base): the PNG's bytes.
    pub async fn draw(&self, request: &ImageRequest<'_>) -> Result<Vec<u8>, ImagesError> {
        let key = self.api_key.as_ref().ok_or(ImagesError::NoKey)?;
        let builder = match request.base {
            None => self
                .http
                .post(format!("{}/images/generations", self.base_url))
                .json(&serde_json::json!({
                    "model": request.model,
                    "prompt": request.prompt,
                    "size": request.size,
                    "quality": request.quality,
                    "n": 1,
                })),
            Some(base) => {
                let boundary = format!("codebutler-{:032x}", rand::random::<u128>());
                let body = edit_body(&boundary, request, base);
                self.http
                    .post(format!("{}/images/edits", self.base_url))
                    .header(
                        reqwest::header::CONTENT_TYPE,
                        format!("multipart/form-data; boundary={boundary}"),
                    )
                    .body(body)
            }
        };
        let (status, text) = send(builder, key).await?;
        decode_answer(status, &text)
    }
}

/// Sends `request` with the key `key`, within [`IMAGES_TIMEOUT`]: the answer's status and
/// text.
pub(crate) async fn send(
    request: reqwest::RequestBuilder,
    key: &Secret,
) -> Result<(u16, String), ImagesError> {
    let call = async {
        let response = request
            .bearer_auth(key.expose())
            .send()
            .await
            .map_err(transport)?;
        let status = response.status().as_u16();
        let text = response.text().await.map_err(transport)?;
        Ok::<_, ImagesError>((status, text))
    };
    tokio::time::timeout(IMAGES_TIMEOUT, call)
        .await
        .map_err(|_| ImagesError::Timeout)?
}

pub(crate) fn transport(e: reqwest::Error) -> ImagesError {
    // reqwest's message names the URL, which holds no secret; the key travels in a header.
    ImagesError::Transport(e.without_url().to_string())
}

/// The image in an answer of the images API with HTTP `status` and body `text`.
fn decode_answer(status: u16, text: &str) -> Result<Vec<u8>, ImagesError> {
    if !(200..300).contains(&status) {
        return Err(http_error(status, text));
    }
    let response: ImagesResponse =
        serde_json::from_str(text).map_err(|e| ImagesError::Decode(e.to_string()))?;
    let encoded = response
        .data
        .into_iter()
        .find_map(|d| d.b64_json)
        .ok_or_else(|| ImagesError::Decode("no `b64_json` in `data`".into()))?;
    decode_png(&encoded)
}

/// The error of an answer with HTTP `status` and body `text`: its `error.message` (OpenAI's
/// and OpenRouter's shape), else the body, cut short.
pub(crate) fn http_error(status: u16, text: &str) -> ImagesError {
    let message = serde_json::from_str::<ErrorResponse>(text)
        .map(|e| e.error.message)
        .unwrap_or_else(|_| text.to_owned());
    ImagesError::Http {
        status,
        message: message.chars().take(300).collect(),
    }
}

/// The PNG in base64 text `encoded`, checked to be a PNG within [`MAX_IMAGE_BYTES`].
pub(crate) fn decode_png(encoded: &str) -> Result<Vec<u8>, ImagesError> {
    if encoded.len() / 4 * 3 > MAX_IMAGE_BYTES + 3 {
        return Err(ImagesError::TooLarge);
    }
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(encoded.trim())
        .map_err(|e| ImagesError::Decode(format!("base64: {e}")))?;
    if bytes.len() > MAX_IMAGE_BYTES {
        return Err(ImagesError::TooLarge);
    }
    if !bytes.starts_with(&PNG_SIGNATURE) {
        return Err(ImagesError::Decode("not a PNG".into()));
    }
    Ok(bytes)
}

/// The multipart body of an edit: the request's fields, then the base image as `image`.
fn edit_body(boundary: &str, request: &ImageRequest<'_>, base: BaseImage<'_>) -> Vec<u8> {
    let mut body = Vec::new();
    for (name, value) in [
        ("model", request.model),
        ("prompt", request.prompt),
        ("size", request.size),
        ("quality", request.quality),
        ("n", "1"),
    ] {
        body.extend_from_slice(
            format!(
                "--{boundary}\r\nContent-Disposition: form-data; name=\"{name}\"\r\n\r\n{value}\r\n"
            )
            .as_bytes(),
        );
    }
    let extension = match base.mimetype {
        "image/jpeg" => "jpg",
        "image/webp" => "webp",
        _ => "png",
    };
    body.extend_from_slice(
        format!(
            "--{boundary}\r\nContent-Disposition: form-data; name=\"image\"; filename=\"base.{extension}\"\r\nContent-Type: {}\r\n\r\n",
            base.mimetype
        )
        .as_bytes(),
    );
    body.extend_from_slice(base.bytes);
    body.extend_from_slice(format!("\r\n--{boundary}--\r\n").as_bytes());
    body
}

#[cfg(test)]
mod tests {
    use super::*;

    fn png() -> Vec<u8> {
        let mut bytes = PNG_SIGNATURE.to_vec();
        bytes.extend_from_slice(b"rest");
        bytes
    }

    #[test]
    fn an_answer_gives_its_png_and_refuses_anything_else() {
        let encoded = base64::engine::general_purpose::STANDARD.encode(png());
        let ok = format!(r#"{{"data":[{{"b64_json":"{encoded}"}}]}}"#);
        assert_eq!(decode_answer(200, &ok).unwrap(), png());
        let gif = base64::engine::general_purpose::STANDARD.encode(b"GIF89a....");
        let not_png = format!(r#"{{"data":[{{"b64_json":"{gif}"}}]}}"#);
        assert!(matches!(
            decode_answer(200, &not_png),
            Err(ImagesError::Decode(_))
        ));
        assert!(matches!(
            decode_answer(200, r#"{"data":[]}"#),
            Err(ImagesError::Decode(_))
        ));
        let refused = decode_answer(400, r#"{"error":{"message":"bad prompt"}}"#).unwrap_err();
        assert_eq!(
            refused.to_string(),
            "the images API answered HTTP 400: bad prompt"
        );
    }

    #[test]
    fn an_edit_sends_its_fields_and_the_base_image_whole() {
        let base = BaseImage {
            mimetype: "image/png",
            bytes: &[0, 159, 146, 150, b'\r', b'\n'],
        };
        let request = ImageRequest {
            model: "gpt-image-1",
            prompt: "a fox",
            size: "1024x1024",
            quality: "medium",
            base: Some(base),
        };
        let body = edit_body("B", &request, base);
        let text = String::from_utf8_lossy(&body);
        assert!(text.starts_with(
            "--B\r\nContent-Disposition: form-data; name=\"model\"\r\n\r\ngpt-image-1\r\n"
        ));
        assert!(text.contains("name=\"prompt\"\r\n\r\na fox\r\n"));
        let start = b"Content-Type: image/png\r\n\r\n";
        let at = body.windows(start.len()).position(|w| w == start).unwrap() + start.len();
        assert_eq!(&body[at..at + 6], base.bytes);
        assert!(body.ends_with(b"\r\n--B--\r\n"));
    }
}
