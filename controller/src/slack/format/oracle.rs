//! The oracle of the renderer's one safety property: every `<…>` in a message is markup the
//! renderer may produce for its source. It is written independently of the code it checks
//! (it knows nothing of how the renderer recognises references or builds links), so the
//! formatting tests and the fuzz targets can hold the renderer to it.

use super::is_invisible;

/// The first `<…>` in `mrkdwn` that is not markup the renderer may produce for the Markdown
/// `source`, or an unclosed `<`; `None` when the text is inert.
///
/// Allowed: a user or channel reference (`<@U…>`, `<@W…>`, `<#C…>`, `<#C…|name>`) that the
/// source wrote itself, and a web or mail link (`<https://…>`, `<mailto:…|label>`) whose
/// target has no characters that could end it early and whose label does not show a URL,
/// `www.` name or e-mail address on another host than the target's.
pub fn foreign_markup(mrkdwn: &str, source: &str) -> Option<String> {
    let mut rest = mrkdwn;
    while let Some(at) = rest.find('<') {
        let tail = &rest[at..];
        let Some(end) = tail.find('>') else {
            return Some(format!("unclosed `<` before {:?}", preview(tail)));
        };
        let token = &tail[..=end];
        if !allowed_markup(token, source) {
            return Some(token.to_owned());
        }
        rest = &tail[end + 1..];
    }
    None
}

fn preview(text: &str) -> String {
    text.chars().take(60).collect()
}

fn allowed_markup(token: &str, source: &str) -> bool {
    let inner = &token[1..token.len() - 1];
    if inner.contains('<') || inner.contains('\n') {
        return false;
    }
    match inner.chars().next() {
        Some('@' | '#') => allowed_reference(inner) && source.contains(token),
        _ => allowed_link(inner),
    }
}

fn allowed_reference(inner: &str) -> bool {
    let (head, label) = match inner.split_once('|') {
        Some((head, label)) => (head, Some(label)),
        None => (inner, None),
    };
    let id_ok = |id: &str, first: &[char]| {
        id.starts_with(first)
            && id.len() >= 2
            && id
                .chars()
                .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit())
    };
    match (head.split_at(1), label) {
        (("@", id), None) => id_ok(id, &['U', 'W']),
        (("#", id), _) => id_ok(id, &['C']) && label.is_none_or(|l| !l.contains(['&', '|'])),
        _ => false,
    }
}

fn allowed_link(inner: &str) -> bool {
    let (url, label) = match inner.split_once('|') {
        Some((url, label)) => (url, Some(label)),
        None => (inner, None),
    };
    let lower = url.to_ascii_lowercase();
    let scheme_ok = ["http://", "https://", "mailto:"]
        .iter()
        .any(|s| lower.starts_with(s));
    if !scheme_ok || url.chars().any(|c| c.is_whitespace() || c == '`') {
        return false;
    }
    let target = host_of(&lower);
    label.is_none_or(|label| {
        address_hosts(label)
            .iter()
            .all(|shown| target.as_deref() == Some(shown.as_str()))
    })
}

/// The host of a web or mail URL, lower-case, without `www.`.
fn host_of(url: &str) -> Option<String> {
    let host = if let Some(rest) = url.strip_prefix("mailto:") {
        let address = rest.split('?').next()?;
        address.rsplit_once('@')?.1.to_owned()
    } else {
        let rest = url.split_once("://")?.1;
        let authority = rest.split(['/', '?', '#', '\\']).next()?;
        let host_port = authority.rsplit('@').next()?;
        host_port.split(':').next()?.to_owned()
    };
    let host = host.trim_end_matches('.');
    Some(host.strip_prefix("www.").unwrap_or(host).to_owned())
}

/// The hosts of the unmistakable addresses a label shows: URLs, `www.` names and e-mail
/// addresses (mrkdwn entities decoded, formatting and what a person cannot see ignored).
fn address_hosts(label: &str) -> Vec<String> {
    let visible: String = label.chars().filter(|&c| !is_invisible(c)).collect();
    let text = visible
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&amp;", "&")
        .replace(['。', '．', '｡'], ".")
        .to_lowercase();
    text.split(|c: char| c.is_whitespace() || "()[]{}<>\"'*_~`,;|".contains(c))
        .filter_map(|word| {
            let word = word.trim_end_matches(['.', ':', '!', '?']);
            if word.contains("://") {
                host_of(word)
            } else if let Some(rest) = word.strip_prefix("www.") {
                host_of(&format!("http://{rest}"))
            } else if word.rsplit_once('@')?.1.split('?').next()?.contains('.') {
                host_of(&format!("mailto:{word}"))
            } else {
                None
            }
        })
        .filter(|host| !host.is_empty())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_oracle_tells_inert_text_from_markup() {
        let source = "ask <@U0ALICE> in <#C0DEV|dev>";
        for inert in [
            "plain &lt;!channel&gt; text",
            "ask <@U0ALICE> in <#C0DEV|dev>",
            "<https://x.example/a?b=1&c=2|the docs> and <mailto:a@b.example>",
            "<https://www.good.example/x|https://good.example/y>",
        ] {
            assert_eq!(foreign_markup(inert, source), None, "{inert}");
        }
        for (text, found) in [
            ("<!channel>", "<!channel>"),
            ("hi <!here|here>", "<!here|here>"),
            ("<@U0BOB>", "<@U0BOB>"),
            (
                "<https://evil.example|https://good.example>",
                "<https://evil.example|https://good.example>",
            ),
            (
                "<https://evil.example|write to me@good.example>",
                "<https://evil.example|write to me@good.example>",
            ),
            ("<javascript:alert(1)|x>", "<javascript:alert(1)|x>"),
            ("<https://x.example/```|x>", "<https://x.example/```|x>"),
        ] {
            assert_eq!(
                foreign_markup(text, source).as_deref(),
                Some(found),
                "{text}"
            );
        }
        assert!(foreign_markup("a <https://x.example", source).is_some());
    }
}
