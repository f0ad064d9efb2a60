//! Image generation through chat completions, as OpenRouter does it: a `POST
//! /v1/chat/completions` whose `modalities` hold `"image"` is answered by an image model (one
//! listed with [`FakeModel::list_image_model`]) with the image in
//! `choices[0].message.images[]` as `{"type": "image_url", "image_url": {"url":
//! "data:image/png;base64,…"}}`, and, when the request asks (`"usage": {"include": true}`),
//! the image's price in `usage.cost`.
//!
//! The image is derived from what was received, as [`crate::images::FakeImages`] does: the
//! PNG of [`crate::images::fake_png`] for the user message's text, and for an edit the bytes
//! of the `data:` URI in its `image_url` part, so a product that sends another prompt, no
//! base or a different one gets a different image. A model that does not output images, or
//! (for an edit) does not take them, is refused as OpenRouter refuses it. Every request is
//! recorded ([`FakeModel::image_calls`]).

use std::sync::Arc;

use axum::body::Bytes;
use axum::http::{HeaderMap, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use super::{FakeModel, Inner, auth_problem, content_text, openrouter_error};
use crate::images::{ImageCall, fake_png};

/// What one image costs when the test set no price (USD), as `usage.cost` reports it.
pub const IMAGE_COST: f64 = 0.039;

impl FakeModel {
    /// Every image generation request, in arrival order (refused ones without `answered`).
    pub fn image_calls(&self) -> Vec<ImageCall> {
        self.inner.lock().image_calls.clone()
    }

    /// Makes each image of `model` cost `dollars` in `usage.cost`.
    pub fn price_image(&self, model: &str, dollars: f64) {
        self.inner
            .lock()
            .image_prices
            .insert(model.to_owned(), dollars);
    }
}

/// Whether `request` asks for image output.
pub(super) fn asks_for_images(request: &Value) -> bool {
    request["modalities"]
        .as_array()
        .is_some_and(|m| m.iter().any(|m| m == "image"))
}

/// Answers an image generation request.
pub(super) fn draw(inner: &Arc<Inner>, headers: &HeaderMap, request: &Value) -> Response {
    let authorization = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok());
    let mut st = inner.lock();
    let model = request["model"].as_str().unwrap_or_default().to_owned();
    let messages = request["messages"].as_array().cloned().unwrap_or_default();
    let user: Vec<&Value> = messages.iter().filter(|m| m["role"] == "user").collect();
    let prompt = user
        .last()
        .map(|m| content_text(m.get("content")))
        .unwrap_or_default();
    let parts: Vec<&Value> = user
        .last()
        .and_then(|m| m["content"].as_array())
        .into_iter()
        .flatten()
        .filter(|p| p["type"] == "image_url")
        .collect();
    let mut call = ImageCall {
        endpoint: "chat/completions".into(),
        model: model.clone(),
        prompt: prompt.clone(),
        size: String::new(),
        image: None,
        answered: None,
    };
    let refuse = |st: &mut super::ModelState, call: ImageCall, status: u16, why: String| {
        st.violations.push(format!("image generation: {why}"));
        st.image_calls.push(call);
        openrouter_error(status, &why)
    };
    if let Some(problem) = auth_problem(authorization, st.api_key.as_deref()) {
        return refuse(&mut st, call, 401, problem.to_owned());
    }
    let Some(listed) = st.listed.iter().find(|m| m.id == model).cloned() else {
        return refuse(
            &mut st,
            call,
            400,
            format!("{model} is not a valid model ID"),
        );
    };
    if !listed.output.contains(&"image") {
        let why = "No endpoints found that support the requested output modalities: image, text";
        return refuse(&mut st, call, 404, why.to_owned());
    }
    if prompt.trim().is_empty() {
        return refuse(&mut st, call, 400, "the user message has no text".into());
    }
    if parts.len() > 1 {
        return refuse(&mut st, call, 400, "more than one image to edit".into());
    }
    if let Some(part) = parts.first() {
        if !listed.input.contains(&"image") {
            let why = "No endpoints found that support image input";
            return refuse(&mut st, call, 404, why.to_owned());
        }
        let url = part["image_url"]["url"].as_str().unwrap_or_default();
        let decoded = url
            .split_once(";base64,")
            .filter(|(head, _)| head.starts_with("data:image/"))
            .and_then(|(_, data)| base64_decode(data));
        match decoded {
            Some(bytes) => call.image = Some(bytes),
            None => {
                return refuse(
                    &mut st,
                    call,
                    400,
                    format!("not an image data URI: {url:.40}"),
                );
            }
        }
    }
    let png = fake_png(&prompt, call.image.as_deref());
    call.answered = Some(png.clone());
    st.image_calls.push(call);
    let cost = st.image_prices.get(&model).copied().unwrap_or(IMAGE_COST);
    drop(st);
    let mut usage = json!({"prompt_tokens": prompt.len() / 4, "completion_tokens": 1290, "total_tokens": prompt.len() / 4 + 1290});
    if request["usage"]["include"] == true {
        usage["cost"] = json!(cost);
    }
    let url = format!(
        "data:image/png;base64,{}",
        crate::images::base64_encode(&png)
    );
    let body = json!({
        "id": "gen-image",
        "object": "chat.completion",
        "created": 1_700_000_000,
        "model": model,
        "choices": [{
            "index": 0,
            "finish_reason": "stop",
            "message": {
                "role": "assistant",
                "content": "Here is the image.",
                "images": [{"type": "image_url", "image_url": {"url": url}}],
            },
        }],
        "usage": usage,
    });
    (
        [(header::CONTENT_TYPE, "application/json")],
        body.to_string(),
    )
        .into_response()
}

/// Standard base64 (padding optional); `None` for anything else.
fn base64_decode(text: &str) -> Option<Vec<u8>> {
    let value = |c: u8| match c {
        b'A'..=b'Z' => Some(c - b'A'),
        b'a'..=b'z' => Some(c - b'a' + 26),
        b'0'..=b'9' => Some(c - b'0' + 52),
        b'+' => Some(62),
        b'/' => Some(63),
        _ => None,
    };
    let digits: Vec<u8> = text
        .trim_end_matches('=')
        .bytes()
        .map(value)
        .collect::<Option<_>>()?;
    let mut out = Vec::with_capacity(digits.len() * 3 / 4);
    for chunk in digits.chunks(4) {
        let mut n = 0u32;
        for (i, d) in chunk.iter().enumerate() {
            n |= u32::from(*d) << (18 - 6 * i);
        }
        let bytes = n.to_be_bytes();
        match chunk.len() {
            4 => out.extend_from_slice(&bytes[1..4]),
            3 => out.extend_from_slice(&bytes[1..3]),
            2 => out.push(bytes[1]),
            _ => return None,
        }
    }
    Some(out)
}

/// Keeps the request's body for [`draw`] when it is JSON that asks for images.
pub(super) fn image_request(body: &Bytes) -> Option<Value> {
    serde_json::from_slice::<Value>(body)
        .ok()
        .filter(asks_for_images)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_decodes_what_the_encoder_wrote() {
        for bytes in [&b""[..], b"a", b"ab", b"abc", b"abcd", &[0, 255, 128, 7, 9]] {
            let encoded = crate::images::base64_encode(bytes);
            assert_eq!(base64_decode(&encoded).as_deref(), Some(bytes));
        }
        assert_eq!(base64_decode("a*b="), None);
    }
}
