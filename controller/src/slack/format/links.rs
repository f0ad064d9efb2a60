//! Links and images as Slack `<url|text>` links.
//!
//! Slack only links URLs with a scheme, and a `|` or `>` in the URL would end
//! the link early, so relative targets are spelled out after the label and
//! the rest are percent-encoded. The renderer collects a link's label first
//! (it may contain formatting), then hands it here.

use pulldown_cmark::LinkType;

use super::escape::escape;

/// Renders a link to `url` whose label rendered as `label` (escaped mrkdwn)
/// from the plain text `raw`; an autolink (label = URL) shows the URL once.
pub(super) fn render_link(url: String, link_type: LinkType, label: &str, raw: &str) -> String {
    let target = if link_type == LinkType::Email && !url.starts_with("mailto:") {
        format!("mailto:{url}")
    } else {
        url
    };
    if has_scheme(&target) {
        let target = sanitize_url(&target);
        if label.is_empty() || raw.trim() == target {
            format!("<{target}>")
        } else {
            format!("<{target}|{label}>")
        }
    } else if label.is_empty() {
        escape(&target)
    } else if raw.trim() == target {
        label.to_string()
    } else {
        format!("{label} ({})", escape(&target))
    }
}

/// Renders an image as a link to it, labelled with its `alt` text (escaped
/// mrkdwn); one without a scheme is reduced to its alt text.
pub(super) fn render_image(url: &str, alt: &str) -> String {
    if has_scheme(url) {
        let url = sanitize_url(url);
        if alt.is_empty() {
            format!("<{url}>")
        } else {
            format!("<{url}|{alt}>")
        }
    } else if alt.is_empty() {
        escape(url)
    } else {
        alt.to_string()
    }
}

/// Whether `url` starts with a URI scheme (`https:`, `mailto:`, …); Slack
/// only links those.
fn has_scheme(url: &str) -> bool {
    let Some((scheme, _)) = url.split_once(':') else {
        return false;
    };
    scheme.len() >= 2
        && scheme.starts_with(|c: char| c.is_ascii_alphabetic())
        && scheme
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
}

/// Percent-encodes the characters that would break `<url|text>`.
fn sanitize_url(url: &str) -> String {
    let mut out = String::with_capacity(url.len());
    for c in url.chars() {
        match c {
            '<' => out.push_str("%3C"),
            '>' => out.push_str("%3E"),
            '|' => out.push_str("%7C"),
            c if c.is_whitespace() => out.push_str("%20"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use crate::slack::format::markdown_to_mrkdwn;

    #[test]
    fn links() {
        assert_eq!(
            markdown_to_mrkdwn("see [the docs](https://example.com/a?x=1&y=2) now"),
            "see <https://example.com/a?x=1&y=2|the docs> now"
        );
        assert_eq!(
            markdown_to_mrkdwn("<https://example.com/x>"),
            "<https://example.com/x>"
        );
        assert_eq!(
            markdown_to_mrkdwn("[a **b** & c](https://x.io)"),
            "<https://x.io|a *b* &amp; c>"
        );
        assert_eq!(
            markdown_to_mrkdwn("<me@example.com>"),
            "<mailto:me@example.com|me@example.com>"
        );
        assert_eq!(
            markdown_to_mrkdwn("[odd](https://x.io/a|b)"),
            "<https://x.io/a%7Cb|odd>"
        );
        assert_eq!(
            markdown_to_mrkdwn("[notes](docs/notes.md)"),
            "notes (docs/notes.md)"
        );
    }

    #[test]
    fn images() {
        assert_eq!(
            markdown_to_mrkdwn("![a chart](https://x.io/c.png)"),
            "<https://x.io/c.png|a chart>"
        );
    }
}
