//! The approval, stop, undo and budget phrases (`approval.rs`, `budget.rs`) on any text a
//! person could type.
#![no_main]

use codebutler_controller::thread::approval::{is_approval, is_stop, is_undo};
use codebutler_controller::thread::budget::{cap_text, parse_budget_command, usd};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|text: &str| {
    let verdicts = |t: &str| (is_approval(t), is_stop(t), is_undo(t));
    let (approval, stop, undo) = verdicts(text);
    // A message is at most one command.
    assert!(
        u8::from(approval) + u8::from(stop) + u8::from(undo) <= 1,
        "{text:?} is more than one command"
    );
    // ASCII case, surrounding whitespace and a mention in front change nothing.
    for variant in [
        text.to_ascii_uppercase(),
        format!(" \t{text}\n "),
        format!("<@U0BOT> {text}"),
    ] {
        assert_eq!(
            verdicts(&variant),
            (approval, stop, undo),
            "{text:?} vs {variant:?}"
        );
    }
    // More than an approval goes back to the PM.
    assert!(
        !is_approval(&format!("{text} but change the tests")),
        "{text:?}"
    );

    if let Some(cap) = parse_budget_command(text) {
        assert!(cap.is_finite() && cap >= 0.0, "{text:?} → {cap}");
        assert!(text.to_lowercase().contains("budget"), "{text:?}");
        assert!(!approval && !stop && !undo, "{text:?} is also a command");
        assert_eq!(parse_budget_command(&format!("budget ${cap}")), Some(cap));
        assert!(usd(cap).starts_with('$'));
        assert!(!cap_text(cap).is_empty());
    }
});
