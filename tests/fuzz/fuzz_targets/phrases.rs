//! The approval, stop, undo and budget phrases (`approval.rs`, `budget.rs`), the replies to a
//! memory proposal and corrections (`memory/proposal.rs`) on any text a person could type, and
//! memory operations (`domain/memory_ops.rs`) parsed from any model answer.
#![no_main]

use codebutler_controller::domain::memory_ops as ops;
use codebutler_controller::memory::proposal::{Reply, parse_correction, parse_reply};
use codebutler_controller::thread::approval::{is_approval, is_stop, is_undo};
use codebutler_controller::gateway::budget::{cap_text, parse_budget_command, usd};
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

    // Memory replies: whitespace and a mention in front change nothing, ASCII case changes
    // nothing but an added or changed line's own text; numbers start at 1.
    let reply = parse_reply(text);
    assert_eq!(parse_reply(&format!(" \t{text}\n ")), reply, "{text:?}");
    assert_eq!(parse_reply(&format!("<@U0BOT> {text}")), reply, "{text:?}");
    let kind = |r: &Option<Reply>| {
        r.as_ref().map(|r| match r {
            Reply::Add(..) => "add".to_owned(),
            Reply::Change(n, _) => format!("change {n}"),
            other => format!("{other:?}"),
        })
    };
    assert_eq!(
        kind(&parse_reply(&text.to_ascii_uppercase())),
        kind(&reply),
        "{text:?}"
    );
    if let Some(Reply::Remove(numbers)) = &reply {
        assert!(
            !numbers.is_empty() && numbers.iter().all(|n| *n >= 1),
            "{text:?}"
        );
    }
    if let Some((number, answer)) = parse_correction(text) {
        assert!(number >= 1 && !answer.trim().is_empty(), "{text:?}");
    }

    // Memory operations from a model answer, checked against the same text as the memory:
    // every line is one checked line, and applying is total and idempotent.
    if let Ok(parsed) = ops::parse(text, text) {
        for op in &parsed {
            let line = match op {
                ops::Op::Append { line, .. } => line,
                ops::Op::Replace { new, .. } => new,
            };
            assert_eq!(ops::check_line(line).as_ref(), Ok(line), "{text:?}");
        }
        let once = ops::apply(text, &parsed).expect("operations checked against the memory apply");
        assert_eq!(ops::apply(&once, &parsed).as_ref(), Ok(&once), "{text:?}");
    }
});
