//! The Markdown → mrkdwn renderer and the splitter: every message under Slack's limit with
//! balanced fences, every `<…>` one the renderer may produce (see `foreign_markup`), snippet
//! names that are plain file names; the splitter on any text keeps chunks in bounds and
//! loses nothing but whitespace.
#![no_main]

use codebutler_controller::fuzzing::foreign_markup;
use codebutler_controller::slack::format::{
    MAX_MESSAGE_CHARS, Outgoing, markdown_to_mrkdwn, render_reply, split_message,
};
use codebutler_controller::slack::interactive::sections;
use libfuzzer_sys::fuzz_target;

fn fences_balance(text: &str) -> bool {
    text.matches("```").count().is_multiple_of(2)
}

fn inert(text: &str, markdown: &str) {
    if let Some(found) = foreign_markup(text, markdown) {
        panic!("foreign markup {found:?} in {text:?}");
    }
}

/// What splitting must keep: everything but whitespace, fences and quote marks.
fn essence(text: &str) -> String {
    text.chars()
        .filter(|c| !c.is_whitespace() && *c != '`' && *c != '>')
        .collect()
}

fuzz_target!(|data: &[u8]| {
    let Some((&limit_byte, rest)) = data.split_first() else {
        return;
    };
    let Ok(markdown) = std::str::from_utf8(rest) else {
        return;
    };
    for part in render_reply(markdown, "*PM:* ") {
        match part {
            Outgoing::Text(text) => {
                assert!(text.chars().count() <= MAX_MESSAGE_CHARS, "{text:?}");
                assert!(!text.trim().is_empty());
                assert!(fences_balance(&text), "{text:?}");
                inert(&text, markdown);
                let blocks = serde_json::to_value(sections(&text)).unwrap();
                for block in blocks.as_array().unwrap() {
                    let section = block["text"]["text"].as_str().unwrap();
                    assert!(section.chars().count() <= 3000);
                    inert(section, markdown);
                }
            }
            Outgoing::Snippet {
                filename,
                filetype,
                content: _,
            } => {
                assert!(!filename.is_empty() && !filetype.is_empty());
                assert!(
                    filename
                        .chars()
                        .all(|c| c.is_ascii_alphanumeric() || "._-+@".contains(c)),
                    "{filename:?}"
                );
            }
        }
    }
    inert(&markdown_to_mrkdwn(markdown), markdown);

    let limit = usize::from(limit_byte) * 4;
    let chunks = split_message(markdown, limit);
    for chunk in &chunks {
        assert!(chunk.chars().count() <= limit.max(32), "{chunk:?}");
        assert!(!chunk.trim().is_empty());
        assert!(fences_balance(chunk), "{chunk:?}");
    }
    assert_eq!(
        essence(&chunks.concat()),
        essence(markdown),
        "split lost text"
    );
});
