//! Escaping for Slack: the three control characters of mrkdwn, and runs of
//! backticks that would read as a code fence.
//!
//! Every character of the answer that reaches a message goes through one of
//! these two functions, so an answer can neither mention `<!channel>` nor
//! open a ```` ``` ```` block that [`split_message`](super::split_message)
//! does not know about.

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

/// Stand-ins for the angle brackets of Slack user and channel references, from Unicode's
/// private use area: they pass Markdown parsing and escaping untouched.
const OPEN: char = '\u{E000}';
const CLOSE: char = '\u{E001}';

/// Hides Slack's user and channel references (`<@U123>`, `<@W123>`, `<#C123>`,
/// `<#C123|name>`) from the Markdown parser and the escaping, so mentions keep working.
/// Special mentions such as `<!channel>` are not references: an answer never pings a whole
/// channel.
pub(super) fn protect_references(markdown: &str) -> String {
    let mut out = String::with_capacity(markdown.len());
    let mut rest = markdown;
    while let Some(i) = rest.find('<') {
        out.push_str(&rest[..i]);
        let tail = &rest[i..];
        match reference_len(tail) {
            Some(n) => {
                out.push(OPEN);
                out.push_str(&tail[1..n - 1]);
                out.push(CLOSE);
                rest = &tail[n..];
            }
            None => {
                out.push('<');
                rest = &tail[1..];
            }
        }
    }
    out.push_str(rest);
    out
}

/// Puts the protected references' angle brackets back.
pub(super) fn restore_references(text: &str) -> String {
    text.replace(OPEN, "<").replace(CLOSE, ">")
}

/// The length of a user or channel reference at the start of `s`, if one is there.
fn reference_len(s: &str) -> Option<usize> {
    let end = s.find('>')?;
    let inner = &s[1..end];
    let (kind, body) = inner.split_at_checked(1)?;
    let (id, label) = match body.split_once('|') {
        Some((id, label)) => (id, Some(label)),
        None => (body, None),
    };
    let id_ok = id.len() >= 2
        && id
            .chars()
            .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit())
        && match kind {
            "@" => id.starts_with('U') || id.starts_with('W'),
            "#" => id.starts_with('C'),
            _ => false,
        };
    let label_ok = label.is_none_or(|l| !l.contains(['<', '&']));
    (id_ok && label_ok).then_some(end + 1)
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
