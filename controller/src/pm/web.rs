//! The researcher's `fetch_url`: a GET through the controller's web fetches
//! ([`crate::runners::fetch::FetchPolicy`], the Coder's: the same host rules, internal
//! addresses refused, redirects not followed, the same client), its body bounded and given
//! to the model as text. A URL the rules refuse is a tool error and nothing is fetched. The
//! URLs fetched with a success status are kept ([`FetchUrl::fetched`]), so the answer's
//! "Sources:" line names the pages actually read, whatever the model claims.
//!
//! The controller never parses a page: HTML becomes text in one linear pass that drops tags,
//! comments and the contents of `script` and `style` ([`page_text`]), so no page can tie it
//! up; the text is cut at [`MAX_TEXT_CHARS`].

use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use codebutler_agent::conversation::ToolSpec;
use codebutler_agent::schema::parameters;
use codebutler_agent::tool::{Tool, ToolError, parse_args};
use schemars::JsonSchema;
use serde::Deserialize;

use crate::runners::fetch::FetchPolicy;

/// Most bytes of a page read.
pub const MAX_PAGE_BYTES: u64 = 512 * 1024;
/// Most characters of a page's text given to the model.
pub const MAX_TEXT_CHARS: usize = 20_000;
/// Most pages one answer may fetch.
pub const MAX_FETCHES: usize = 8;

/// `fetch_url{url}`.
#[derive(Debug)]
pub struct FetchUrl {
    policy: Arc<FetchPolicy>,
    fetched: Arc<Mutex<Vec<String>>>,
}

impl FetchUrl {
    /// Fetches under `policy`.
    pub fn new(policy: Arc<FetchPolicy>) -> Self {
        Self {
            policy,
            fetched: Arc::new(Mutex::new(Vec::new())),
        }
    }

    /// The URLs fetched with a success status, in order, without repeats.
    pub fn fetched(&self) -> Vec<String> {
        self.fetched
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
}

/// fetch_url's arguments.
#[derive(Deserialize, JsonSchema)]
struct FetchUrlArgs {
    /// The page's http or https address.
    url: String,
}

#[async_trait]
impl Tool for FetchUrl {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "fetch_url",
            description: "Fetch a web page (GET) and read it as text. Cite the pages you use.",
            parameters: parameters::<FetchUrlArgs>(),
        }
    }

    fn read_only(&self) -> bool {
        true
    }

    async fn call(&self, args: serde_json::Value) -> Result<String, ToolError> {
        let args: FetchUrlArgs = parse_args("fetch_url", args)?;
        let url = args.url.trim().to_owned();
        if self.fetched().len() >= MAX_FETCHES {
            return Err(ToolError::Failed(format!(
                "at most {MAX_FETCHES} pages per answer: answer with what you read"
            )));
        }
        let page = self
            .policy
            .fetch(&url, MAX_PAGE_BYTES)
            .await
            .map_err(|status| ToolError::Failed(format!("{url}: {}", status.message())))?;
        if !(200..300).contains(&page.status) {
            return Err(ToolError::Failed(format!(
                "{url} answered HTTP {}",
                page.status
            )));
        }
        {
            let mut fetched = self.fetched.lock().unwrap_or_else(|e| e.into_inner());
            if !fetched.contains(&page.final_url) {
                fetched.push(page.final_url.clone());
            }
        }
        let html = page.content_type.to_ascii_lowercase().contains("html");
        let raw = String::from_utf8_lossy(&page.body);
        let text = if html {
            page_text(&raw)
        } else {
            raw.into_owned()
        };
        let cut = text.chars().count() > MAX_TEXT_CHARS;
        let text: String = text.chars().take(MAX_TEXT_CHARS).collect();
        let more = if page.truncated || cut { " (cut)" } else { "" };
        Ok(format!("{}{more}\n\n{text}", page.final_url))
    }
}

/// The text of an HTML page in one linear pass: tags and comments dropped, `script` and
/// `style` contents dropped, a few entities read, whitespace collapsed.
pub fn page_text(html: &str) -> String {
    let mut out = String::with_capacity(html.len() / 2);
    let lower = html.to_ascii_lowercase();
    let mut i = 0;
    let bytes = html.as_bytes();
    while i < bytes.len() {
        if lower[i..].starts_with("<!--") {
            i = lower[i + 4..]
                .find("-->")
                .map_or(bytes.len(), |end| i + 4 + end + 3);
            continue;
        }
        if bytes[i] == b'<' {
            let skip_to = ["script", "style"].iter().find_map(|tag| {
                let open = format!("<{tag}");
                lower[i..].starts_with(&open).then(|| {
                    let close = format!("</{tag}");
                    lower[i..]
                        .find(&close)
                        .map_or(bytes.len(), |at| i + at + close.len())
                })
            });
            let from = skip_to.unwrap_or(i);
            i = lower[from..]
                .find('>')
                .map_or(bytes.len(), |end| from + end + 1);
            out.push(' ');
            continue;
        }
        let next = lower[i..].find('<').map_or(bytes.len(), |at| i + at);
        out.push_str(&html[i..next]);
        i = next;
    }
    let out = out
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&#39;", "'")
        .replace("&nbsp;", " ")
        .replace("&amp;", "&");
    let mut text = String::with_capacity(out.len());
    for line in out.lines() {
        let words = line.split_whitespace().collect::<Vec<_>>().join(" ");
        if !words.is_empty() {
            text.push_str(&words);
            text.push('\n');
        }
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_page_reads_as_its_text() {
        let html = "<html><head><title>Docs</title><style>p { color: red }</style>\
            <script>alert('<b>')</script></head><body><!-- hidden <p>no</p> -->\n\
            <h1>serde 2</h1>\n<p>Use <code>Deserialize</code> &amp; friends.</p>\n<SCRIPT>x()</SCRIPT></body></html>";
        assert_eq!(
            page_text(html),
            "Docs\nserde 2\nUse Deserialize & friends.\n"
        );
        // Unclosed constructs end the text, never loop.
        assert_eq!(page_text("a <script>never closed"), "a\n");
        assert_eq!(page_text("b <!-- never closed"), "b\n");
        assert_eq!(page_text("c <p"), "c\n");
    }
}
