//! Images through OpenRouter, for the Artist (`artist.provider` `openrouter`). OpenRouter has
//! no images endpoint: a model that outputs images draws through chat completions. The
//! request is `POST <openrouter.baseUrl>/chat/completions` with `"modalities": ["image",
//! "text"]`, one user message holding the prompt (and, for an edit, the base image as an
//! `image_url` content part carrying a `data:` URI), and `"usage": {"include": true}` so the
//! answer says what it cost. The answer's `choices[0].message.images[]` holds
//! `{"type": "image_url", "image_url": {"url": "data:image/png;base64,…"}}`; the first one is
//! the image, checked to be a PNG within [`MAX_IMAGE_BYTES`](super::images::MAX_IMAGE_BYTES)
//! before anything keeps it, and `usage.cost` (USD) is its price.
//!
//! The size is not sent: chat image generation takes no pixel size, the model draws at its
//! own. The key (`openrouter.apiKey`, the controller's) goes in the `Authorization` header
//! only; no error names it.

use std::time::Duration;

use base64::Engine as _;
use serde::Deserialize;
use serde_json::{Value, json};

use super::images::{ImageRequest, ImagesError, decode_png, http_error, send, transport};
use crate::config::OpenRouterConfig;
use crate::secret::Secret;

/// OpenRouter's chat completions, drawing.
#[derive(Clone, Debug)]
pub struct OpenRouterImages {
    http: reqwest::Client,
    url: String,
    api_key: Secret,
}

/// An image OpenRouter drew, with what it said it cost.
#[derive(Clone, Debug, PartialEq)]
pub struct Drawn {
    pub png: Vec<u8>,
    /// `usage.cost` of the answer (USD), if it had one.
    pub cost: Option<f64>,
}

#[derive(Deserialize)]
struct Answer {
    #[serde(default)]
    choices: Vec<Choice>,
    usage: Option<Usage>,
}

#[derive(Deserialize)]
struct Choice {
    message: AnswerMessage,
}

#[derive(Deserialize)]
struct AnswerMessage {
    content: Option<String>,
    #[serde(default)]
    images: Vec<AnswerImage>,
}

#[derive(Deserialize)]
struct AnswerImage {
    image_url: ImageUrl,
}

#[derive(Deserialize)]
struct ImageUrl {
    url: String,
}

#[derive(Deserialize)]
struct Usage {
    cost: Option<f64>,
}

impl OpenRouterImages {
    /// Draws through `config`'s OpenRouter (`openrouter.baseUrl`, `openrouter.apiKey`).
    pub fn new(config: &OpenRouterConfig) -> Result<Self, ImagesError> {
        crate::tls::ensure_provider();
        let http = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(10))
            .user_agent(concat!("codebutler/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(transport)?;
        Ok(Self {
            http,
            url: format!("{}/chat/completions", config.base_url.trim_end_matches('/')),
            api_key: config.api_key.clone(),
        })
    }

    /// Draws `request`'s image (an edit of its base when it has one).
    pub async fn draw(&self, request: &ImageRequest<'_>) -> Result<Drawn, ImagesError> {
        let body = request_body(request);
        let request = self.http.post(&self.url).json(&body);
        let (status, text) = send(request, &self.api_key).await?;
        decode_answer(status, &text)
    }
}

/// The chat completions request that draws `request`.
fn request_body(request: &ImageRequest<'_>) -> Value {
    let content = match request.base {
        None => json!(request.prompt),
        Some(base) => {
            let data = base64::engine::general_purpose::STANDARD.encode(base.bytes);
            json!([
                {"type": "text", "text": request.prompt},
                {"type": "image_url", "image_url": {"url": format!("data:{};base64,{data}", base.mimetype)}},
            ])
        }
    };
    json!({
        "model": request.model,
        "modalities": ["image", "text"],
        "messages": [{"role": "user", "content": content}],
        "usage": {"include": true},
    })
}

/// The image and cost in an answer with HTTP `status` and body `text`.
fn decode_answer(status: u16, text: &str) -> Result<Drawn, ImagesError> {
    if !(200..300).contains(&status) {
        return Err(http_error(status, text));
    }
    let answer: Answer =
        serde_json::from_str(text).map_err(|e| ImagesError::Decode(e.to_string()))?;
    let cost = answer.usage.and_then(|u| u.cost).filter(|c| c.is_finite());
    let message = answer
        .choices
        .into_iter()
        .next()
        .ok_or_else(|| ImagesError::Decode("no `choices`".into()))?
        .message;
    let Some(image) = message.images.into_iter().next() else {
        // A model that declines answers text only: what it said, cut short, is the reason.
        let said: String = message
            .content
            .unwrap_or_default()
            .chars()
            .take(200)
            .collect();
        return Err(ImagesError::Decode(format!(
            "the model drew no image (it said: {said:?})"
        )));
    };
    let url = image.image_url.url;
    let encoded = url
        .strip_prefix("data:image/png;base64,")
        .ok_or_else(|| ImagesError::Decode("the image is not a `data:image/png` URI".into()))?;
    Ok(Drawn {
        png: decode_png(encoded)?,
        cost,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gateway::images::{BaseImage, PNG_SIGNATURE};

    fn png() -> Vec<u8> {
        let mut bytes = PNG_SIGNATURE.to_vec();
        bytes.extend_from_slice(b"rest");
        bytes
    }

    fn request(base: Option<BaseImage<'_>>) -> ImageRequest<'_> {
        ImageRequest {
            model: "google/gemini-2.5-flash-image-preview",
            prompt: "a fox",
            size: "1024x1024",
            quality: "medium",
            base,
        }
    }

    #[test]
    fn a_drawing_asks_for_images_and_the_cost_and_an_edit_sends_its_base_as_a_data_uri() {
        assert_eq!(
            request_body(&request(None)),
            json!({
                "model": "google/gemini-2.5-flash-image-preview",
                "modalities": ["image", "text"],
                "messages": [{"role": "user", "content": "a fox"}],
                "usage": {"include": true},
            })
        );
        let base = BaseImage {
            mimetype: "image/jpeg",
            bytes: &[1, 2, 3],
        };
        let body = request_body(&request(Some(base)));
        assert_eq!(
            body["messages"][0]["content"],
            json!([
                {"type": "text", "text": "a fox"},
                {"type": "image_url", "image_url": {"url": "data:image/jpeg;base64,AQID"}},
            ])
        );
    }

    #[test]
    fn an_answer_gives_its_png_and_cost_and_refuses_anything_else() {
        let encoded = base64::engine::general_purpose::STANDARD.encode(png());
        let ok = json!({
            "choices": [{"message": {"role": "assistant", "content": "Here.", "images": [
                {"type": "image_url", "image_url": {"url": format!("data:image/png;base64,{encoded}")}}
            ]}}],
            "usage": {"prompt_tokens": 5, "completion_tokens": 1290, "cost": 0.0387}
        });
        assert_eq!(
            decode_answer(200, &ok.to_string()).unwrap(),
            Drawn {
                png: png(),
                cost: Some(0.0387)
            }
        );
        let declined = json!({"choices": [{"message": {"content": "I cannot draw that."}}]});
        let e = decode_answer(200, &declined.to_string()).unwrap_err();
        assert!(e.to_string().contains("I cannot draw that."), "{e}");
        let jpeg = json!({"choices": [{"message": {"images": [
            {"type": "image_url", "image_url": {"url": "data:image/jpeg;base64,AQID"}}
        ]}}]});
        assert!(matches!(
            decode_answer(200, &jpeg.to_string()),
            Err(ImagesError::Decode(_))
        ));
        let refused = decode_answer(
            402,
            r#"{"error":{"code":402,"message":"Insufficient credits"}}"#,
        )
        .unwrap_err();
        assert_eq!(
            refused.to_string(),
            "the images API answered HTTP 402: Insufficient credits"
        );
    }
}
