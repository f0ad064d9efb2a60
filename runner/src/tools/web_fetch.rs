//! WebFetch: the Coder reads a web page. The runner has no network, so the page is fetched
//! by the controller (its hub's `Fetch`, under the allow/deny policy and a size cap) through
//! a [`WebSource`]; this tool turns what comes back into text for the model.
//!
//! HTML becomes readable text with `html2text` (links as numbered footnotes), under bounds
//! on bytes, nesting, attributes, text and time that a hostile page cannot get round (see
//! [`html`]; what they cut is noted for the model); text, JSON, XML, YAML and Markdown pass
//! through; anything else (images, PDFs, archives, unknown binary) is refused with a
//! message saying what it was. A URL the policy denies, an HTTP error status and an
//! unreachable host are each reported plainly, so the model can decide what to do instead.
//! The text returned is capped at [`MAX_TEXT_CHARS`]. The conversion runs here, in the
//! sandboxed runner and off its async runtime; the controller only fetches the bytes.

mod dom;
#[doc(hidden)]
pub mod html;

use std::sync::Arc;

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::Deserialize;

use codebutler_agent::conversation::ToolSpec;
use codebutler_agent::schema::parameters;
use codebutler_agent::tool::{Tool, ToolError, parse_args, run_blocking};

use html::{Limits, html_to_text};

/// Most characters of page text returned to the model.
pub const MAX_TEXT_CHARS: usize = 20_000;
/// Body bytes asked of the controller (it applies its own, possibly lower, cap).
pub const FETCH_MAX_BYTES: u64 = 1024 * 1024;
/// Longest URL accepted.
const MAX_URL_CHARS: usize = 2_048;

/// A page as the controller fetched it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct FetchedPage {
    /// HTTP status of the response.
    pub status: u32,
    /// The `Content-Type` header, empty when absent.
    pub content_type: String,
    /// The body, at most the capped size.
    pub body: Vec<u8>,
    /// Whether the body was cut at the size cap.
    pub truncated: bool,
    /// The URL fetched.
    pub final_url: String,
}

/// Why the controller did not fetch a page.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum FetchFailure {
    /// The fetch policy refused the URL (deny list, allow list, internal address, scheme).
    #[error("{0}")]
    Denied(String),
    /// The URL itself is unusable.
    #[error("{0}")]
    Invalid(String),
    /// The host could not be reached or the hub failed.
    #[error("{0}")]
    Unavailable(String),
}

/// Where pages come from: the controller's hub in the runner, a fake in tests.
#[async_trait]
pub trait WebSource: Send + Sync {
    /// Fetches `url`, returning at most `max_bytes` of its body.
    async fn fetch(&self, url: &str, max_bytes: u64) -> Result<FetchedPage, FetchFailure>;
}

/// Fetches web pages through a [`WebSource`].
#[derive(Clone)]
pub struct WebFetchTool {
    source: Arc<dyn WebSource>,
}

impl std::fmt::Debug for WebFetchTool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WebFetchTool").finish_non_exhaustive()
    }
}

impl WebFetchTool {
    /// A WebFetch whose pages come from `source`.
    pub fn new(source: Arc<dyn WebSource>) -> Self {
        Self { source }
    }
}

/// WebFetch's arguments.
#[derive(Deserialize, JsonSchema)]
struct Args {
    /// The absolute http(s) URL to fetch.
    url: String,
}

const TOOL: &str = "WebFetch";

fn invalid(reason: impl Into<String>) -> ToolError {
    ToolError::InvalidArguments {
        tool: TOOL.into(),
        reason: reason.into(),
    }
}

#[async_trait]
impl Tool for WebFetchTool {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: TOOL,
            description: "Fetch a web page (http or https) and read it as text: HTML is converted to plain text with links as footnotes; text, JSON and Markdown come as they are. Binary content (images, PDFs, archives) is refused. The controller fetches it under a policy that may refuse hosts; the text is cut at 20,000 characters.",
            parameters: parameters::<Args>(),
        }
    }

    fn read_only(&self) -> bool {
        true
    }

    async fn call(&self, args: serde_json::Value) -> Result<String, ToolError> {
        let args: Args = parse_args(TOOL, args)?;
        let url = checked_url(&args.url)?;
        let page = self
            .source
            .fetch(url, FETCH_MAX_BYTES)
            .await
            .map_err(|failure| match failure {
                FetchFailure::Denied(why) => ToolError::Failed(format!(
                    "fetching {url} is not allowed: {why}. Do not retry this URL; work without it or ask the people in the thread."
                )),
                FetchFailure::Invalid(why) => invalid(format!("url {url:?} is unusable: {why}")),
                FetchFailure::Unavailable(why) => {
                    ToolError::Failed(format!("could not fetch {url}: {why}"))
                }
            })?;
        run_blocking(TOOL, move || render_page(&page)).await
    }
}

/// The URL, trimmed, if it looks like an absolute http(s) URL. The controller parses and
/// checks it properly; this only turns obvious garbage into a clear argument error.
fn checked_url(raw: &str) -> Result<&str, ToolError> {
    let url = raw.trim();
    if url.is_empty() {
        return Err(invalid("url is empty"));
    }
    if url.chars().count() > MAX_URL_CHARS {
        return Err(invalid(format!(
            "url is longer than {MAX_URL_CHARS} characters"
        )));
    }
    if url.chars().any(char::is_whitespace) {
        return Err(invalid("url contains whitespace"));
    }
    let lower = url.to_ascii_lowercase();
    let rest = lower
        .strip_prefix("https://")
        .or_else(|| lower.strip_prefix("http://"));
    match rest {
        Some(rest) if !rest.is_empty() && !rest.starts_with('/') => Ok(url),
        Some(_) => Err(invalid(format!("url {url:?} has no host"))),
        None => Err(invalid(format!(
            "url {url:?} is not an absolute http:// or https:// URL"
        ))),
    }
}

/// How a body is to be read.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Kind {
    Html,
    Text,
    Binary,
}

/// The media type without parameters, lower-case (`text/html; charset=utf-8` → `text/html`).
fn essence(content_type: &str) -> String {
    content_type
        .split(';')
        .next()
        .unwrap_or_default()
        .trim()
        .to_ascii_lowercase()
}

/// What kind of content a response holds: by its media type, or (when it has none) by
/// whether the body looks like text.
fn kind_of(content_type: &str, body: &[u8]) -> Kind {
    let media = essence(content_type);
    if media.is_empty() {
        return sniff(body);
    }
    if media == "text/html" || media == "application/xhtml+xml" {
        return Kind::Html;
    }
    let textual = media.starts_with("text/")
        || media.ends_with("+json")
        || media.ends_with("+xml")
        || matches!(
            media.as_str(),
            "application/json"
                | "application/xml"
                | "application/javascript"
                | "application/ecmascript"
                | "application/x-javascript"
                | "application/yaml"
                | "application/x-yaml"
                | "application/toml"
                | "application/x-sh"
                | "application/sql"
                | "application/graphql"
                | "application/x-ndjson"
        );
    if textual { Kind::Text } else { Kind::Binary }
}

/// Text or binary, for a body without a media type: HTML if it starts like HTML, text if
/// it is UTF-8 without control bytes, binary otherwise.
fn sniff(body: &[u8]) -> Kind {
    let head = &body[..body.len().min(1024)];
    let text = match std::str::from_utf8(head) {
        Ok(text) => text,
        // A multi-byte character cut at the sample's end is still text.
        Err(e) if e.error_len().is_none() && body.len() > head.len() => {
            std::str::from_utf8(&head[..e.valid_up_to()]).unwrap_or_default()
        }
        Err(_) => return Kind::Binary,
    };
    if text
        .chars()
        .any(|c| c.is_control() && !matches!(c, '\n' | '\r' | '\t' | '\u{c}'))
    {
        return Kind::Binary;
    }
    let start = text.trim_start().to_ascii_lowercase();
    if start.starts_with("<!doctype html") || start.starts_with("<html") {
        Kind::Html
    } else {
        Kind::Text
    }
}

/// The text the model reads for a fetched page, or why there is none.
fn render_page(page: &FetchedPage) -> Result<String, ToolError> {
    let url = &page.final_url;
    let kind = kind_of(&page.content_type, &page.body);
    if !(200..300).contains(&page.status) {
        let mut message = format!("HTTP {} from {url}", page.status);
        if kind != Kind::Binary && !page.body.is_empty() {
            match to_text(kind, &page.body) {
                Ok((text, _)) => {
                    let excerpt: String = text.trim().chars().take(500).collect();
                    if !excerpt.is_empty() {
                        message.push_str(&format!("; the page says:\n{excerpt}"));
                    }
                }
                Err(e) => message.push_str(&format!("; {e}")),
            }
        }
        return Err(ToolError::Failed(message));
    }
    if kind == Kind::Binary {
        let media = match essence(&page.content_type) {
            m if m.is_empty() => "no content type".to_owned(),
            m => m,
        };
        return Err(ToolError::Failed(format!(
            "{url} is binary content ({media}, {} bytes); WebFetch only reads text, HTML, JSON and Markdown",
            page.body.len()
        )));
    }
    let (text, notes) = to_text(kind, &page.body)?;
    let total = text.chars().count();
    let mut out = format!("URL: {url}\nContent-Type: {}\n", page.content_type);
    if page.truncated {
        out.push_str("(the page was cut at the controller's size cap)\n");
    }
    for note in notes {
        out.push_str(&note);
        out.push('\n');
    }
    out.push('\n');
    if total > MAX_TEXT_CHARS {
        out.extend(text.chars().take(MAX_TEXT_CHARS));
        out.push_str(&format!(
            "\n[text cut at {MAX_TEXT_CHARS} of {total} characters]"
        ));
    } else {
        out.push_str(&text);
    }
    Ok(out)
}

/// The body as text, with notes on what the HTML bounds cut.
fn to_text(kind: Kind, body: &[u8]) -> Result<(String, Vec<String>), ToolError> {
    match kind {
        Kind::Html => {
            let limits = Limits::default();
            let converted =
                html_to_text(body, &limits).map_err(|e| ToolError::Failed(e.to_string()))?;
            Ok((converted.text, converted.cuts.notes(&limits)))
        }
        Kind::Text | Kind::Binary => Ok((String::from_utf8_lossy(body).into_owned(), vec![])),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::sync::Mutex;

    /// Answers every fetch with one result and records the URLs asked for.
    struct Fake {
        result: Result<FetchedPage, FetchFailure>,
        asked: Mutex<Vec<(String, u64)>>,
    }

    #[async_trait]
    impl WebSource for Fake {
        async fn fetch(&self, url: &str, max_bytes: u64) -> Result<FetchedPage, FetchFailure> {
            self.asked.lock().unwrap().push((url.to_owned(), max_bytes));
            self.result.clone()
        }
    }

    fn tool(result: Result<FetchedPage, FetchFailure>) -> (WebFetchTool, Arc<Fake>) {
        let fake = Arc::new(Fake {
            result,
            asked: Mutex::new(vec![]),
        });
        (WebFetchTool::new(fake.clone()), fake)
    }

    fn page(status: u32, content_type: &str, body: &[u8]) -> FetchedPage {
        FetchedPage {
            status,
            content_type: content_type.into(),
            body: body.to_vec(),
            truncated: false,
            final_url: "https://docs.example/page".into(),
        }
    }

    async fn fetch(tool: &WebFetchTool) -> Result<String, ToolError> {
        tool.call(json!({"url": "https://docs.example/page"})).await
    }

    #[tokio::test]
    async fn html_becomes_readable_text_without_scripts() {
        let html = br#"<!doctype html><html><head><title>T</title>
            <style>body { color: red }</style><script>var secret = "SCRIPT-BODY";</script></head>
            <body><h1>Session expiry</h1><p>Sessions last <b>one hour</b>. See
            <a href="https://docs.example/auth">the auth guide</a>.</p>
            <ul><li>first</li><li>second</li></ul></body></html>"#;
        let (t, fake) = tool(Ok(page(200, "text/html; charset=utf-8", html)));
        let out = fetch(&t).await.unwrap();
        assert!(
            out.starts_with(
                "URL: https://docs.example/page\nContent-Type: text/html; charset=utf-8\n\n"
            ),
            "{out}"
        );
        assert!(out.contains("# Session expiry"), "{out}");
        assert!(out.contains("Sessions last **one hour**."), "{out}");
        assert!(out.contains("[the auth guide][1]"), "{out}");
        assert!(out.contains("[1]: https://docs.example/auth"), "{out}");
        assert!(out.contains("* first\n* second"), "{out}");
        assert!(
            !out.contains("SCRIPT-BODY") && !out.contains("color: red"),
            "{out}"
        );
        assert!(!out.contains("<p>"), "{out}");
        assert_eq!(
            fake.asked.lock().unwrap()[0],
            ("https://docs.example/page".to_owned(), FETCH_MAX_BYTES)
        );
    }

    #[tokio::test]
    async fn text_json_and_markdown_pass_through() {
        for (ct, body) in [
            ("text/plain", "plain *text* <b>kept</b>"),
            ("application/json", r#"{"version": "1.2.3"}"#),
            ("text/markdown; charset=utf-8", "# Title\n\n- item"),
            ("application/vnd.api+json", r#"{"data": []}"#),
        ] {
            let (t, _) = tool(Ok(page(200, ct, body.as_bytes())));
            let out = fetch(&t).await.unwrap();
            assert!(out.ends_with(&format!("\n\n{body}")), "{ct}: {out}");
        }
        // No content type: sniffed.
        let (t, _) = tool(Ok(page(200, "", b"just text")));
        assert!(fetch(&t).await.unwrap().ends_with("\n\njust text"));
        let (t, _) = tool(Ok(page(200, "", b"<html><body><p>hi</p></body></html>")));
        assert!(fetch(&t).await.unwrap().ends_with("\n\nhi\n"));
    }

    #[tokio::test]
    async fn binary_content_is_refused_with_its_type() {
        let png = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR";
        let (t, _) = tool(Ok(page(200, "image/png", png)));
        let err = fetch(&t).await.unwrap_err().to_string();
        assert_eq!(
            err,
            "https://docs.example/page is binary content (image/png, 16 bytes); WebFetch only reads text, HTML, JSON and Markdown"
        );
        for ct in [
            "application/pdf",
            "application/octet-stream",
            "application/zip",
        ] {
            let (t, _) = tool(Ok(page(200, ct, b"%PDF-1.7")));
            let err = fetch(&t).await.unwrap_err().to_string();
            assert!(err.contains(&format!("binary content ({ct}")), "{err}");
        }
        let (t, _) = tool(Ok(page(200, "", png)));
        let err = fetch(&t).await.unwrap_err().to_string();
        assert!(err.contains("binary content (no content type"), "{err}");
    }

    #[tokio::test]
    async fn denied_urls_and_http_errors_are_reported_plainly() {
        let (t, _) = tool(Err(FetchFailure::Denied(
            "evil.example is on the fetch deny list".into(),
        )));
        let err = fetch(&t).await.unwrap_err().to_string();
        assert!(
            err.starts_with("fetching https://docs.example/page is not allowed: evil.example is on the fetch deny list. Do not retry"),
            "{err}"
        );
        let (t, _) = tool(Ok(page(404, "text/html", b"<h1>Not Found</h1>")));
        let err = fetch(&t).await.unwrap_err().to_string();
        assert_eq!(
            err,
            "HTTP 404 from https://docs.example/page; the page says:\n# Not Found"
        );
        let (t, _) = tool(Ok(page(503, "image/gif", b"GIF89a")));
        assert_eq!(
            fetch(&t).await.unwrap_err().to_string(),
            "HTTP 503 from https://docs.example/page"
        );
        let (t, _) = tool(Err(FetchFailure::Unavailable(
            "resolve nowhere: no such host".into(),
        )));
        assert_eq!(
            fetch(&t).await.unwrap_err().to_string(),
            "could not fetch https://docs.example/page: resolve nowhere: no such host"
        );
    }

    #[tokio::test]
    async fn bad_arguments_are_refused_before_any_fetch() {
        let (t, fake) = tool(Ok(page(200, "text/plain", b"x")));
        for (args, needle) in [
            (json!({}), "missing field `url`"),
            (json!({"url": 7}), "invalid type"),
            (json!({"url": "  "}), "url is empty"),
            (json!({"url": "ftp://x.example/f"}), "not an absolute http"),
            (json!({"url": "/etc/passwd"}), "not an absolute http"),
            (json!({"url": "https:///path"}), "has no host"),
            (json!({"url": "https://a.example/x y"}), "whitespace"),
            (
                json!({"url": format!("https://a.example/{}", "x".repeat(3000))}),
                "longer than",
            ),
        ] {
            let err = t.call(args.clone()).await.unwrap_err().to_string();
            assert!(
                err.starts_with("invalid arguments for WebFetch") && err.contains(needle),
                "{args}: {err}"
            );
        }
        assert!(fake.asked.lock().unwrap().is_empty());
    }

    #[tokio::test]
    async fn long_text_is_cut_and_says_so() {
        let body = "é".repeat(MAX_TEXT_CHARS + 10);
        let mut p = page(200, "text/plain; charset=utf-8", body.as_bytes());
        p.truncated = true;
        let (t, _) = tool(Ok(p));
        let out = fetch(&t).await.unwrap();
        assert!(
            out.contains("(the page was cut at the controller's size cap)"),
            "{out}"
        );
        assert!(out.ends_with(&format!(
            "[text cut at {MAX_TEXT_CHARS} of {} characters]",
            MAX_TEXT_CHARS + 10
        )));
        assert_eq!(out.matches('é').count(), MAX_TEXT_CHARS);
    }

    #[tokio::test]
    async fn hostile_html_is_bounded_and_says_what_was_cut() {
        let deep = format!("{}deep{}", "<div>".repeat(20_000), "</div>".repeat(20_000));
        let (t, _) = tool(Ok(page(200, "text/html", deep.as_bytes())));
        let out = fetch(&t).await.unwrap();
        assert!(
            out.contains(
                "[19748 tags nested deeper than 256 elements were dropped; their text is kept]\n"
            ),
            "{out}"
        );
        assert!(out.ends_with("deep\n"), "{out}");

        let flat = "<p>some words of text</p>".repeat(60_000);
        let mut p = page(200, "text/html", flat.as_bytes());
        p.body.truncate(1_500_000);
        let (t, _) = tool(Ok(p));
        let out = fetch(&t).await.unwrap();
        assert!(
            out.contains("[only the first 1048576 of 1500000 bytes of HTML were read]\n"),
            "{}",
            &out[..300]
        );
        assert!(
            out.contains("[the page was read up to 80000 characters of text]\n"),
            "{}",
            &out[..300]
        );
        assert!(out.ends_with(" characters]"), "{}", &out[out.len() - 100..]);
    }

    #[tokio::test]
    async fn deeply_nested_html_does_not_crash_the_runner() {
        let html = format!("{}deep{}", "<div>".repeat(5_000), "</div>".repeat(5_000));
        let (t, _) = tool(Ok(page(200, "text/html", html.as_bytes())));
        // Either text or a clear error; never a panic or a stack overflow.
        match fetch(&t).await {
            Ok(out) => assert!(out.contains("deep"), "{out}"),
            Err(e) => assert!(e.to_string().contains("HTML"), "{e}"),
        }
    }
}
