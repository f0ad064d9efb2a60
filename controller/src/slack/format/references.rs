//! Slack user and channel references in the answer, carried through Markdown parsing as
//! tokens the answer cannot forge.
//!
//! `<@U123>` and `<#C123|dev>` must reach Slack as written, but pulldown-cmark would take
//! them apart and the escaping would defuse their brackets. So before parsing, [`protect`]
//! replaces each reference with a token — a private-use character, the reference's index in
//! a table, another private-use character — that Markdown leaves alone. Every private-use
//! character of those two in the answer itself becomes a token as well, standing for that
//! character: the only tokens in the parsed text are ones `protect` wrote, so no answer,
//! whatever its Unicode, can make one.
//!
//! The renderer decides per place what a token becomes: in prose, the reference's markup
//! ([`References::mrkdwn`]); everywhere else — code, link targets and labels, table cells,
//! HTML, snippet contents — the text the answer wrote ([`References::plain`]), escaped or
//! not as that place requires. A reference is markup only where Slack shows it as a mention.

use super::escape::escape;
use super::inert::Markup;

/// Opens a token (private use area: passes Markdown parsing and escaping untouched).
const OPEN: char = '\u{E000}';
/// Closes a token.
const CLOSE: char = '\u{E001}';
/// Longest user or channel id taken as a reference (Slack's are about 11 characters).
const MAX_ID_CHARS: usize = 32;
/// Longest channel name in a `<#C…|name>` reference (Slack allows 80).
const MAX_LABEL_CHARS: usize = 80;

/// What a token stands for.
#[derive(Debug)]
enum Entry {
    /// A user or channel reference, brackets included.
    Reference(String),
    /// One of the token characters, written by the answer itself.
    Literal(char),
}

/// The table behind the tokens of one answer.
#[derive(Debug, Default)]
pub(super) struct References {
    entries: Vec<Entry>,
}

/// `markdown` with its references and token characters replaced by tokens, and the table
/// that resolves them. NUL becomes U+FFFD, as CommonMark requires.
pub(super) fn protect(markdown: &str) -> (String, References) {
    let mut refs = References::default();
    let mut out = String::with_capacity(markdown.len());
    let mut rest = markdown;
    while let Some((at, c)) = rest
        .char_indices()
        .find(|&(_, c)| matches!(c, '<' | OPEN | CLOSE | '\0'))
    {
        out.push_str(&rest[..at]);
        let tail = &rest[at..];
        let taken = match c {
            '<' => match reference_len(tail) {
                Some(n) => {
                    refs.push_token(&mut out, Entry::Reference(tail[..n].to_owned()));
                    n
                }
                None => {
                    out.push('<');
                    1
                }
            },
            '\0' => {
                out.push(char::REPLACEMENT_CHARACTER);
                1
            }
            token_char => {
                refs.push_token(&mut out, Entry::Literal(token_char));
                token_char.len_utf8()
            }
        };
        rest = &tail[taken..];
    }
    out.push_str(rest);
    (out, refs)
}

impl References {
    fn push_token(&mut self, out: &mut String, entry: Entry) {
        out.push(OPEN);
        out.push_str(&self.entries.len().to_string());
        out.push(CLOSE);
        self.entries.push(entry);
    }

    /// `text` as the answer wrote it: every token back to its reference or character.
    pub(super) fn plain(&self, text: &str) -> String {
        self.resolve(text, |entry, out| match entry {
            Entry::Reference(reference) => out.push_str(reference),
            Entry::Literal(c) => out.push(*c),
        })
    }

    /// `text` as prose in mrkdwn: escaped, its references live (and recorded in `markup`).
    pub(super) fn mrkdwn(&self, text: &str, markup: &mut Markup) -> String {
        let mut out = String::with_capacity(text.len());
        let mut rest = text;
        while let Some((at, entry, len)) = self.next_token(rest) {
            out.push_str(&escape(&rest[..at]));
            match entry {
                Entry::Reference(reference) => out.push_str(&markup.issue(reference.clone())),
                Entry::Literal(c) => out.push(*c),
            }
            rest = &rest[at + len..];
        }
        out.push_str(&escape(rest));
        out
    }

    /// `text` with each token replaced by what `write` makes of its entry.
    fn resolve(&self, text: &str, write: impl Fn(&Entry, &mut String)) -> String {
        let mut out = String::with_capacity(text.len());
        let mut rest = text;
        while let Some((at, entry, len)) = self.next_token(rest) {
            out.push_str(&rest[..at]);
            write(entry, &mut out);
            rest = &rest[at + len..];
        }
        out.push_str(rest);
        out
    }

    /// The first whole token in `text`: where it starts, its entry and its length. A token
    /// character that does not start a whole token (impossible for parsed text, which only
    /// holds tokens [`protect`] wrote) is left as the character it is.
    fn next_token<'a>(&'a self, text: &str) -> Option<(usize, &'a Entry, usize)> {
        let mut from = 0;
        while let Some(offset) = text[from..].find(OPEN) {
            let at = from + offset;
            let digits = &text[at + OPEN.len_utf8()..];
            let end = digits
                .find(|c: char| !c.is_ascii_digit())
                .unwrap_or(digits.len());
            let whole = end > 0 && digits[end..].starts_with(CLOSE);
            if let Some(entry) = whole
                .then(|| digits[..end].parse::<usize>().ok())
                .flatten()
                .and_then(|index| self.entries.get(index))
            {
                return Some((at, entry, OPEN.len_utf8() + end + CLOSE.len_utf8()));
            }
            from = at + OPEN.len_utf8();
        }
        None
    }
}

/// The length of a user or channel reference at the start of `s`, if one is there:
/// `<@U…>`, `<@W…>`, `<#C…>` or `<#C…|name>`, with an id of capitals and digits and a short
/// one-line name without `<`, `&`, `|` or backticks.
fn reference_len(s: &str) -> Option<usize> {
    let end = s.find('>')?;
    let inner = &s[1..end];
    let (kind, body) = inner.split_at_checked(1)?;
    let (id, label) = match body.split_once('|') {
        Some((id, label)) => (id, Some(label)),
        None => (body, None),
    };
    let id_ok = (2..=MAX_ID_CHARS).contains(&id.len())
        && id
            .chars()
            .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit())
        && match (kind, label) {
            ("@", None) => id.starts_with('U') || id.starts_with('W'),
            ("#", _) => id.starts_with('C'),
            _ => false,
        };
    let label_ok = label.is_none_or(|l| {
        l.chars().count() <= MAX_LABEL_CHARS
            && !l.contains(['<', '&', '|', '`'])
            && !l.chars().any(char::is_control)
    });
    (id_ok && label_ok).then_some(end + 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_resolve_to_what_the_answer_wrote() {
        let md = format!("a <@U1X> b {OPEN}0{CLOSE} <#C9|dev> <!here>\0");
        let (protected, refs) = protect(&md);
        assert!(
            protected.contains("<!here>") && !protected.contains("<@") && !protected.contains('\0')
        );
        assert_eq!(refs.plain(&protected), md.replace('\0', "\u{FFFD}"));
        let mut markup = Markup::default();
        assert_eq!(
            refs.mrkdwn(&protected, &mut markup),
            format!("a <@U1X> b {OPEN}0{CLOSE} <#C9|dev> &lt;!here&gt;\u{FFFD}")
        );
        assert!(markup.contains("<@U1X>") && markup.contains("<#C9|dev>"));
        assert!(!markup.contains("<!here>"));
    }

    #[test]
    fn a_fragment_of_a_token_is_just_characters() {
        let (_, refs) = protect("<@U1X>");
        let mut markup = Markup::default();
        for fragment in [
            format!("{OPEN}0"),
            format!("{OPEN}{CLOSE}"),
            format!("{OPEN}7{CLOSE}"),
        ] {
            assert_eq!(refs.plain(&fragment), fragment);
            assert_eq!(refs.mrkdwn(&fragment, &mut markup), fragment);
        }
        assert!(markup.is_empty());
    }
}
