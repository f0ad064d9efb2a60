//! The PM's `ask_artist`: a message that asks for an image (a logo, an icon, an
//! illustration, a mockup) without `@codebutler.artist` is handed to the Artist by the PM's
//! tool call, never by words in the message itself. The tool only leaves the request in its
//! [`Handoff`]; the thread runs the Artist's turn on the same message once the PM's turn is
//! recorded (`thread::pm_turn`), so the Artist answers exactly as if it had been mentioned.
//! It is offered only when the Artist can draw ([`crate::artist::Artist::can_draw`]).

use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use codebutler_agent::conversation::ToolSpec;
use codebutler_agent::schema::parameters;
use codebutler_agent::tool::{Tool, ToolError, parse_args};
use schemars::JsonSchema;
use serde::Deserialize;

/// The tool's name, as the model calls it.
pub const NAME: &str = "ask_artist";

/// Where a turn's hand-off to the Artist is left: the request the PM wrote, if it handed one.
#[derive(Clone, Debug, Default)]
pub struct Handoff(Arc<Mutex<Option<String>>>);

impl Handoff {
    /// The request handed, if the PM called the tool (the first call's).
    pub fn request(&self) -> Option<String> {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

/// `ask_artist{request}`.
#[derive(Debug)]
pub struct AskArtist {
    handoff: Handoff,
}

impl AskArtist {
    /// Leaves the request in `handoff`.
    pub fn new(handoff: Handoff) -> Self {
        Self { handoff }
    }
}

/// ask_artist's arguments.
#[derive(Deserialize, JsonSchema)]
struct AskArtistArgs {
    /// What the person asked to be drawn, in a sentence.
    request: String,
}

#[async_trait]
impl Tool for AskArtist {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: NAME,
            description: "Hand a request for an image (a logo, an icon, an illustration, a mockup) to the Artist, which answers this message in the thread with an image prompt and its price for the person to approve. Call it once, then end your turn with one short line.",
            parameters: parameters::<AskArtistArgs>(),
        }
    }

    fn read_only(&self) -> bool {
        false
    }

    async fn call(&self, args: serde_json::Value) -> Result<String, ToolError> {
        let args: AskArtistArgs = parse_args(NAME, args)?;
        let request = args.request.trim();
        if request.is_empty() {
            return Err(ToolError::InvalidArguments {
                tool: NAME.into(),
                reason: "`request` must say what to draw".into(),
            });
        }
        let mut slot = self.handoff.0.lock().unwrap_or_else(|e| e.into_inner());
        if slot.is_none() {
            *slot = Some(request.to_owned());
        }
        Ok(
            "Handed to the Artist: it answers this message next, with its prompt and price. \
            End your turn now with one short line, such as \"Handing this to the Artist.\""
                .to_owned(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_first_request_is_kept_and_an_empty_one_is_refused() {
        let handoff = Handoff::default();
        let tool = AskArtist::new(handoff.clone());
        assert_eq!(handoff.request(), None);
        assert!(
            tool.call(serde_json::json!({"request": "  "}))
                .await
                .is_err()
        );
        assert_eq!(handoff.request(), None);
        tool.call(serde_json::json!({"request": "a fox logo"}))
            .await
            .unwrap();
        tool.call(serde_json::json!({"request": "another"}))
            .await
            .unwrap();
        assert_eq!(handoff.request().as_deref(), Some("a fox logo"));
    }
}
