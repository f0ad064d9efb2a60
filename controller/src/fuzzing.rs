//! Entry points and property checks for the fuzz targets in `tests/fuzz/` (and the unit
//! tests that assert the same properties).
//!
//! The fuzz crate calls the daemon's real parsers; where one is private, the narrowest
//! function that applies it the way the daemon does lives here, so no parsing code is
//! copied into the fuzz crate. The markup oracle [`foreign_markup`] lives with the formatter it
//! checks (`slack::format::oracle`) and is re-exported here for the fuzz crate.

use slack_morphism::prelude::*;

use crate::slack::intake::{Intake, IntakeFilter};

pub use crate::slack::format::foreign_markup;

/// What one Socket Mode text frame amounts to, as the daemon applies it.
#[derive(Debug, PartialEq)]
pub enum Frame {
    /// Not an envelope slack-morphism would parse (it reports it, and acknowledges it when
    /// it has an envelope id, so Slack does not resend it).
    Unparsed,
    /// `hello`, `disconnect`, a slash command or another type: nothing for the intake.
    Other,
    /// An `events_api` envelope: the intake's verdict on its event.
    Event(Intake),
    /// An `interactive` envelope: the verdict on the click.
    Interaction(Intake),
}

/// The envelopes of Socket Mode frames, shaped as slack-morphism reads them (its own enum is
/// not exported): the envelope fields it requires, and its payload types.
#[derive(serde::Deserialize)]
#[serde(tag = "type")]
enum Envelope {
    #[serde(rename = "events_api")]
    EventsApi {
        #[allow(dead_code)] // required, as slack-morphism requires it
        envelope_id: String,
        #[allow(dead_code)] // required, as slack-morphism requires it
        accepts_response_payload: bool,
        payload: Box<SlackPushEventCallback>,
    },
    #[serde(rename = "interactive")]
    Interactive {
        #[allow(dead_code)] // required, as slack-morphism requires it
        envelope_id: String,
        #[allow(dead_code)] // required, as slack-morphism requires it
        accepts_response_payload: bool,
        payload: Box<SlackInteractionEvent>,
    },
    #[serde(other)]
    Other,
}

/// Parses a raw Socket Mode text frame into slack-morphism's payload types and hands its
/// event to the intake (messages) or the click classifier (interactions), as the daemon's
/// sink does.
pub fn socket_frame(frame: &str, filter: &IntakeFilter) -> Frame {
    match serde_json::from_str::<Envelope>(frame) {
        Err(_) => Frame::Unparsed,
        Ok(Envelope::EventsApi { payload, .. }) => {
            Frame::Event(crate::slack::intake::classify(&payload, filter))
        }
        Ok(Envelope::Interactive { payload, .. }) => {
            Frame::Interaction(crate::slack::interactive::classify(&payload, filter))
        }
        Ok(Envelope::Other) => Frame::Other,
    }
}
