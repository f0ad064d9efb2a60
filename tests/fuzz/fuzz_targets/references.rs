//! Cross-thread references (`pm/references/`): what is found in any message a person could
//! type, and the PM's context block made of any quoted text.
#![no_main]

use codebutler_controller::pm::references::{
    CONTEXT_HEADER, MAX_REFERENCES, Outcome, Reference, detect, render,
};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|text: &str| {
    let found = detect(text);
    assert!(found.references.len() <= MAX_REFERENCES, "{text:?}");
    for (i, reference) in found.references.iter().enumerate() {
        assert!(
            !found.references[..i].contains(reference),
            "{text:?}: {reference:?} twice"
        );
        match reference {
            Reference::SlackThread {
                channel, thread_ts, ..
            } => {
                assert!(!channel.is_empty(), "{text:?}");
                assert!(
                    channel
                        .chars()
                        .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit()),
                    "{text:?}: channel {channel:?}"
                );
                let (secs, micros) = thread_ts.split_once('.').expect("a ts has a dot");
                assert!(
                    !secs.is_empty()
                        && micros.len() == 6
                        && secs
                            .bytes()
                            .chain(micros.bytes())
                            .all(|b| b.is_ascii_digit()),
                    "{text:?}: ts {thread_ts:?}"
                );
            }
            Reference::GitHub { number, .. } | Reference::Number(number) => {
                assert!(*number > 0, "{text:?}");
            }
        }
    }
    // Surrounding whitespace changes nothing.
    assert_eq!(detect(&format!(" \n{text}\t ")), found, "{text:?}");

    // Any quoted text stays inside its fence, and within the caps.
    let outcome = Outcome::Read {
        label: "PR #1".into(),
        heading: "PR #1: fuzz".into(),
        text: text.to_owned(),
        count: None,
    };
    let rendered = render(&[outcome], 0);
    let context = rendered.context.expect("something was read");
    assert!(context.starts_with(CONTEXT_HEADER));
    let tag = context
        .split("<<<quoted-")
        .nth(1)
        .and_then(|rest| rest.get(..12))
        .expect("a fence");
    assert_eq!(
        context.matches(&format!("quoted-{tag}>>>")).count(),
        1,
        "{text:?} closed its fence"
    );
    assert!(context.chars().count() < 6_000 + 1_000, "{text:?}");
    assert!(
        rendered
            .line
            .is_some_and(|l| l.starts_with("📎 Read PR #1"))
    );
});
