//! Finding references in a person's message: Slack thread links, GitHub pull request and
//! issue addresses, and `#42`. Pure and linear: the text is read once, character by
//! character (no regular expressions, so no input can make it slow), and at most
//! [`MAX_REFERENCES`] distinct references are kept, in the order they appear.
//!
//! Messages arrive in Slack's markup: a pasted address is `<https://…>` or
//! `<https://…|label>`, and `&` in it is `&amp;`. Both forms are read, and so is a bare
//! address (as other clients and the tests send it).

/// Most references read from one message; the rest are counted in [`Detected::dropped`].
pub const MAX_REFERENCES: usize = 5;
/// Longest number taken as a pull request or issue number.
const MAX_NUMBER_DIGITS: usize = 9;

/// A reference found in a message.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Reference {
    /// A Slack thread (or a message in one): `https://<ws>.slack.com/archives/<channel>/p<ts>`,
    /// with `?thread_ts=<ts>` when the link points at a reply.
    SlackThread {
        /// The address, rebuilt from its checked parts (`?thread_ts=…&cid=…` kept for a reply).
        url: String,
        channel: String,
        /// The thread's ts: `thread_ts` when the link has one, else the linked message's.
        thread_ts: String,
    },
    /// `https://github.com/<owner>/<repo>/pull/N` or `…/issues/N`.
    GitHub {
        owner: String,
        repo: String,
        kind: GitHubKind,
        number: u64,
    },
    /// `#N`: this repository's pull request N, or else its issue N.
    Number(u64),
}

/// What a GitHub address names.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum GitHubKind {
    PullRequest,
    Issue,
}

/// The references of a message.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Detected {
    /// Distinct references, in the order they appear, at most [`MAX_REFERENCES`].
    pub references: Vec<Reference>,
    /// Further distinct references left unread.
    pub dropped: usize,
}

/// The references in `text`.
pub fn detect(text: &str) -> Detected {
    let mut found: Vec<Reference> = Vec::new();
    let mut dropped = 0;
    let mut add = |reference: Reference| {
        if found.contains(&reference) {
            return;
        }
        if found.len() < MAX_REFERENCES {
            found.push(reference);
        } else {
            dropped += 1;
        }
    };
    // Tokens end at whitespace and at Slack's link markup (`<`, `>`, `|`), so an address and
    // its label are read apart.
    for token in text.split(|c: char| c.is_whitespace() || matches!(c, '<' | '>' | '|')) {
        if let Some(rest) = strip_scheme(token) {
            if let Some(reference) = parse_address(rest) {
                add(reference);
            }
            // A `#` inside an address is a fragment, never a number.
            continue;
        }
        for number in hash_numbers(token) {
            add(Reference::Number(number));
        }
    }
    Detected {
        references: found,
        dropped,
    }
}

/// What follows `https://` (or `http://`), if `token` starts with it.
fn strip_scheme(token: &str) -> Option<&str> {
    let lower = token.get(..8).map(str::to_ascii_lowercase);
    match lower.as_deref() {
        Some("https://") => token.get(8..),
        _ => match token.get(..7).map(str::to_ascii_lowercase).as_deref() {
            Some("http://") => token.get(7..),
            _ => None,
        },
    }
}

/// A Slack thread or GitHub reference from an address (`rest` follows its scheme).
fn parse_address(rest: &str) -> Option<Reference> {
    let (host, path) = rest.split_once('/').unwrap_or((rest, ""));
    let host = host.to_ascii_lowercase();
    if host == "github.com" || host == "www.github.com" {
        return parse_github(path);
    }
    if host.ends_with(".slack.com")
        && host.len() > ".slack.com".len()
        && host
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '.'))
    {
        return parse_slack(&host, path);
    }
    None
}

/// `<owner>/<repo>/pull/N…` or `<owner>/<repo>/issues/N…`.
fn parse_github(path: &str) -> Option<Reference> {
    let mut parts = path.splitn(4, '/');
    let owner = parts.next().filter(|s| is_github_name(s))?;
    let repo = parts.next().filter(|s| is_github_name(s))?;
    let kind = match parts.next()? {
        "pull" | "pulls" => GitHubKind::PullRequest,
        "issues" => GitHubKind::Issue,
        _ => return None,
    };
    let number = leading_number(parts.next()?)?;
    Some(Reference::GitHub {
        owner: owner.to_owned(),
        repo: repo.to_owned(),
        kind,
        number,
    })
}

/// `archives/<channel>/p<digits>[?…thread_ts=<ts>…]` on the workspace `host`.
fn parse_slack(host: &str, path: &str) -> Option<Reference> {
    let (path, query) = path.split_once('?').unwrap_or((path, ""));
    let path = path.split('#').next().unwrap_or_default();
    let mut parts = path.split('/');
    if parts.next()? != "archives" {
        return None;
    }
    let channel = parts.next()?;
    if channel.is_empty()
        || channel.len() > 20
        || !channel
            .chars()
            .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit())
    {
        return None;
    }
    let digits = parts.next()?.strip_prefix('p')?;
    let message_ts = packed_ts(digits)?;
    let query = query.replace("&amp;", "&");
    let query = query.split('#').next().unwrap_or_default();
    let reply_of = query
        .split('&')
        .find_map(|pair| pair.strip_prefix("thread_ts="))
        .filter(|ts| is_ts(ts));
    // The address rebuilt from its checked parts, so what is linked back is well-formed.
    let mut url = format!("https://{host}/archives/{channel}/p{digits}");
    if let Some(ts) = reply_of {
        url.push_str(&format!("?thread_ts={ts}&cid={channel}"));
    }
    Some(Reference::SlackThread {
        url,
        channel: channel.to_owned(),
        thread_ts: reply_of.map_or(message_ts, str::to_owned),
    })
}

/// A message ts from a link's `p<digits>`: the last six digits are the micro-seconds.
fn packed_ts(digits: &str) -> Option<String> {
    if digits.len() < 7 || digits.len() > 22 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let (secs, micros) = digits.split_at(digits.len() - 6);
    Some(format!("{secs}.{micros}"))
}

/// Whether `ts` is a Slack ts: digits, a dot, six digits.
fn is_ts(ts: &str) -> bool {
    ts.split_once('.').is_some_and(|(secs, micros)| {
        !secs.is_empty()
            && secs.len() <= 15
            && micros.len() == 6
            && secs
                .bytes()
                .chain(micros.bytes())
                .all(|b| b.is_ascii_digit())
    })
}

/// A GitHub owner or repository name: letters, digits, `-`, `_`, `.`.
fn is_github_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 100
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}

/// The number at the start of `s`, if it is followed by nothing or by a character that
/// cannot continue a number or a word (`42`, `42.`, `42#issuecomment-1`, `42/files`).
fn leading_number(s: &str) -> Option<u64> {
    let end = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (digits, rest) = s.split_at(end);
    if digits.is_empty() || digits.len() > MAX_NUMBER_DIGITS {
        return None;
    }
    if rest
        .chars()
        .next()
        .is_some_and(|c| c.is_alphanumeric() || c == '_')
    {
        return None;
    }
    digits.parse().ok().filter(|n| *n > 0)
}

/// The `#N` in a token: `#` at its start or after a character that cannot be part of a
/// word, an entity or a path (so `a#1`, `&#42;` and `/#3` are not references).
fn hash_numbers(token: &str) -> Vec<u64> {
    let mut out = Vec::new();
    let mut previous: Option<char> = None;
    for (i, c) in token.char_indices() {
        if c == '#'
            && previous.is_none_or(|p| !(p.is_alphanumeric() || matches!(p, '&' | '/' | '_' | '#')))
            && let Some(number) = token.get(i + 1..).and_then(leading_number)
        {
            out.push(number);
        }
        previous = Some(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refs(text: &str) -> Vec<Reference> {
        detect(text).references
    }

    fn thread(url: &str, channel: &str, ts: &str) -> Reference {
        Reference::SlackThread {
            url: url.into(),
            channel: channel.into(),
            thread_ts: ts.into(),
        }
    }

    fn github(owner: &str, repo: &str, kind: GitHubKind, number: u64) -> Reference {
        Reference::GitHub {
            owner: owner.into(),
            repo: repo.into(),
            kind,
            number,
        }
    }

    #[test]
    fn slack_thread_links_in_every_form() {
        let url = "https://acme.slack.com/archives/C0123/p1732456789123456";
        assert_eq!(
            refs(&format!("Context: {url}")),
            vec![thread(url, "C0123", "1732456789.123456")]
        );
        // As Slack delivers it: in link markup, with a label, `&` escaped.
        let reply = "https://acme.slack.com/archives/C0123/p1732456799000200?thread_ts=1732456789.123456&amp;cid=C0123";
        assert_eq!(
            refs(&format!("see <{reply}|this thread> and <{url}>")),
            vec![
                thread(
                    "https://acme.slack.com/archives/C0123/p1732456799000200?thread_ts=1732456789.123456&cid=C0123",
                    "C0123",
                    "1732456789.123456"
                ),
                thread(url, "C0123", "1732456789.123456"),
            ]
        );
    }

    #[test]
    fn slack_addresses_are_rebuilt_from_their_checked_parts() {
        assert_eq!(
            refs("(<https://Acme.slack.com/archives/C0123/p1732456789123456?x=)|y>)"),
            vec![thread(
                "https://acme.slack.com/archives/C0123/p1732456789123456",
                "C0123",
                "1732456789.123456"
            )]
        );
        assert_eq!(
            refs("https://a)b.slack.com/archives/C0123/p1732456789123456"),
            vec![]
        );
    }

    #[test]
    fn github_addresses_and_numbers() {
        assert_eq!(
            refs("The login fix from PR #42 broke it. See: https://github.com/org/repo/pull/42"),
            vec![
                Reference::Number(42),
                github("org", "repo", GitHubKind::PullRequest, 42)
            ]
        );
        assert_eq!(
            refs("<https://github.com/org/repo/issues/7#issuecomment-1|issue 7>, (#8), #9."),
            vec![
                github("org", "repo", GitHubKind::Issue, 7),
                Reference::Number(8),
                Reference::Number(9)
            ]
        );
        assert_eq!(
            refs("https://github.com/org/repo/pull/3/files"),
            vec![github("org", "repo", GitHubKind::PullRequest, 3)]
        );
    }

    #[test]
    fn lookalikes_are_not_references() {
        for text in [
            "a#1 &#42; /#3 #0 #x1 #12ab C#9 ##4",
            "https://github.com/org/repo/blob/main/x.rs#L42",
            "https://github.com/org/repo/pull/abc",
            "https://github.com/org/repo/pull/1234567890",
            "https://evil.com/github.com/org/repo/pull/1",
            "https://slack.com/archives/C1/p1732456789123456",
            "https://acme.slack.com/archives/c0123/p1732456789123456",
            "https://acme.slack.com/archives/C0123/1732456789123456",
            "https://acme.slack.com/archives/C0123/p123",
            "<#C0123|general> <@U0ALICE> <!here>",
            "https://example.com/page#42",
        ] {
            assert_eq!(refs(text), vec![], "{text}");
        }
    }

    #[test]
    fn references_are_distinct_and_capped() {
        let d = detect("#1 #2 #1 #3 #4 #5 #6 #7 #2");
        assert_eq!(
            d.references,
            (1..=5).map(Reference::Number).collect::<Vec<_>>()
        );
        assert_eq!(d.dropped, 2);
    }

    #[test]
    fn any_text_is_read_quickly_and_safely() {
        let long = format!(
            "{}{}",
            "#".repeat(100_000),
            "<https://a.slack.com/archives/C1/p".repeat(10_000)
        );
        assert!(detect(&long).references.is_empty());
        for text in [
            "",
            "#",
            "https://",
            "http://x",
            "https://github.com/",
            "ñ#1é #2",
        ] {
            let d = detect(text);
            assert!(d.references.len() <= MAX_REFERENCES);
        }
        assert_eq!(refs("ñ#1é #2"), vec![Reference::Number(2)]);
    }
}
