//! Socket Mode frames as they come off the websocket: the envelope, the push event and the
//! intake's filter, or the interaction and the click classifier.
#![no_main]

use codebutler_controller::domain::{Click, Origin};
use codebutler_controller::fuzzing::{Frame, socket_frame};
use codebutler_controller::slack::intake::{Intake, IntakeFilter};
use codebutler_controller::slack::interactive::reaction_target;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|frame: &str| {
    let filter = IntakeFilter {
        channel: "C0CHAN".into(),
        bot_user_id: "U0BOT".into(),
    };
    let verdict = socket_frame(frame, &filter);
    assert_eq!(verdict, socket_frame(frame, &filter), "not deterministic");
    match &verdict {
        Frame::Event(Intake::Accept(m)) => {
            assert_eq!(m.channel, filter.channel);
            assert_ne!(m.user, filter.bot_user_id, "our own message accepted");
            assert!(!m.text.trim().is_empty(), "empty message accepted");
            assert!(m.event_id.is_some(), "no event id to deduplicate on");
            assert_eq!(m.origin, Origin::Person, "an event is a person's message");
            assert_eq!(m.click(), None, "typed text passed for a click");
            assert_eq!(reaction_target(m), *m);
        }
        Frame::Interaction(Intake::Accept(m)) => {
            assert_eq!(m.channel, filter.channel);
            assert!(
                m.ts.ends_with('c'),
                "a click's ts must stand apart: {}",
                m.ts
            );
            assert_eq!(m.origin, Origin::Click);
            let click = m.click().expect("a stored click reads back as that click");
            assert_eq!(Click::parse(&click.to_text()), Some(click.clone()));
            assert_eq!(reaction_target(m).ts, click.message_ts);
        }
        _ => {}
    }
});
