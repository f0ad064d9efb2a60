//! The Artist model's answer: a JSON object with the image prompt, where the image would go
//! and its size, asked for by [`ANSWER_FORMAT`] and read by [`parse_answer`]. The answer is
//! a model's text: its path is checked ([`super::path`]), its size is one OpenAI prices (else
//! the square default), and its prompt is bounded.

use serde::Deserialize;

use super::path::{PathRefused, check_asset_path};
use crate::gateway::pricing::IMAGE_SIZES;

/// The longest image prompt kept (OpenAI takes up to 32,000 characters for `gpt-image-1`).
pub const MAX_PROMPT_CHARS: usize = 4_000;
/// The size drawn when the Artist names none the API takes.
pub const DEFAULT_SIZE: &str = "1024x1024";

/// What the Artist's system prompt ends with: the shape of its answer.
pub const ANSWER_FORMAT: &str = "\
# Your answer

Answer with one JSON object and nothing else:
{\"prompt\": \"<the image prompt you would send to the image model>\", \
\"path\": \"<where the image goes in the repository, e.g. assets/logo.png>\", \
\"size\": \"1024x1024\" | \"1024x1536\" | \"1536x1024\", \
\"note\": \"<one short sentence to the person, optional>\"}
The image is a PNG: the path ends in `.png`, relative to the repository's root. The person \
sees your prompt and its price and says \"draw it\" before anything is drawn.";

/// What the Artist proposes to draw.
#[derive(Clone, Debug, PartialEq)]
pub struct Proposal {
    pub prompt: String,
    pub path: String,
    pub size: String,
    /// A short sentence to the person, if the Artist wrote one.
    pub note: Option<String>,
}

/// Why the Artist's answer cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum AnswerError {
    #[error("the Artist's answer is not the JSON object asked for: {0}")]
    NotJson(String),
    #[error("the Artist's answer has an empty prompt")]
    EmptyPrompt,
    #[error("the Artist proposed a path that cannot be used: {0}")]
    Path(#[from] PathRefused),
}

#[derive(Deserialize)]
struct Raw {
    prompt: String,
    path: String,
    #[serde(default)]
    size: Option<String>,
    #[serde(default)]
    note: Option<String>,
}

/// The proposal in the Artist model's answer `text` (the outermost `{…}` in it, so a
/// fence or a sentence around it is ignored).
pub fn parse_answer(text: &str) -> Result<Proposal, AnswerError> {
    let (Some(start), Some(end)) = (text.find('{'), text.rfind('}')) else {
        return Err(AnswerError::NotJson("no object".into()));
    };
    if end < start {
        return Err(AnswerError::NotJson("no object".into()));
    }
    let raw: Raw = serde_json::from_str(&text[start..=end])
        .map_err(|e| AnswerError::NotJson(e.to_string()))?;
    let prompt: String = raw.prompt.trim().chars().take(MAX_PROMPT_CHARS).collect();
    if prompt.is_empty() {
        return Err(AnswerError::EmptyPrompt);
    }
    let path = check_asset_path(&raw.path)?;
    let size = raw
        .size
        .map(|s| s.trim().to_owned())
        .filter(|s| IMAGE_SIZES.contains(&s.as_str()))
        .unwrap_or_else(|| DEFAULT_SIZE.to_owned());
    let note = raw
        .note
        .map(|n| n.trim().chars().take(300).collect::<String>())
        .filter(|n| !n.is_empty());
    Ok(Proposal {
        prompt,
        path,
        size,
        note,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_answer_in_a_fence_is_read() {
        let text = "Here:\n```json\n{\"prompt\": \" a fox logo \", \"path\": \"assets/fox.png\", \"size\": \"1536x1024\"}\n```";
        assert_eq!(
            parse_answer(text).unwrap(),
            Proposal {
                prompt: "a fox logo".into(),
                path: "assets/fox.png".into(),
                size: "1536x1024".into(),
                note: None,
            }
        );
    }

    #[test]
    fn an_unknown_size_is_the_default_and_a_bad_path_refuses_the_answer() {
        let p = parse_answer(r#"{"prompt":"x","path":"a.png","size":"4096x4096"}"#).unwrap();
        assert_eq!(p.size, DEFAULT_SIZE);
        assert!(matches!(
            parse_answer(r#"{"prompt":"x","path":"../a.png"}"#),
            Err(AnswerError::Path(PathRefused::OutsideRepository))
        ));
        assert!(matches!(
            parse_answer(r#"{"prompt":" ","path":"a.png"}"#),
            Err(AnswerError::EmptyPrompt)
        ));
        assert!(matches!(
            parse_answer("no json"),
            Err(AnswerError::NotJson(_))
        ));
    }
}
