//! Escaping for Slack: the three control characters of mrkdwn, and runs of
//! backticks that would read as a code fence.
//!
//! Every character of the answer that reaches a message goes through one of
//! these two functions (references through [`References`](super::references),
//! link targets through [`links`](super::links)), so an answer can neither
//! mention `<!channel>` nor open a ```` ``` ```` block that
//! [`split_message`](super::split_message) does not know about.

/// Zero-width space, used to break accidental runs of three backticks.
const ZWSP: char = '\u{200B}';

/// Escapes the three characters Slack treats as control characters.
pub(super) fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            _ => out.push(c),
        }
    }
    out
}

/// Appends `text` to `buf`; unless `fence`, a third consecutive backtick gets
/// a zero-width space first, so the only ```` ``` ```` in the output are ours.
pub(super) fn push_guarded(buf: &mut String, text: &str, fence: bool) {
    for c in text.chars() {
        if c == '`' && !fence && buf.ends_with("``") {
            buf.push(ZWSP);
        }
        buf.push(c);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::slack::format::markdown_to_mrkdwn;

    #[test]
    fn escaping_plain_text() {
        assert_eq!(
            markdown_to_mrkdwn("Tom & Jerry: 1 < 2 > 0, <!channel>"),
            "Tom &amp; Jerry: 1 &lt; 2 &gt; 0, &lt;!channel&gt;"
        );
        assert_eq!(markdown_to_mrkdwn("a &amp; b"), "a &amp; b");
    }

    #[test]
    fn user_and_channel_references_survive_but_special_mentions_do_not() {
        assert_eq!(
            markdown_to_mrkdwn(
                "ask <@U0ALICE> or <@W123> in <#C0CHAN|dev>, not <!channel> or <@lower>"
            ),
            "ask <@U0ALICE> or <@W123> in <#C0CHAN|dev>, not &lt;!channel&gt; or &lt;@lower&gt;"
        );
    }

    #[test]
    fn triple_backticks_in_code_are_defused() {
        let out = markdown_to_mrkdwn("````md\n```rust\nx\n```\n````");
        assert_eq!(out.matches("```").count(), 2, "{out:?}");
        assert!(out.contains(&format!("``{ZWSP}`rust")), "{out:?}");
    }
}
