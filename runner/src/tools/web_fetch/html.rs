//! HTML to text under bounds, so a hostile page cannot tie up the runner.
//!
//! html2text renders well, but html5ever's tree builder spends time proportional to its
//! state — the open elements and the formatting elements it will reopen — on every tag
//! (20,000 nested `<div>`s cost seconds, and so do a few hundred `<b>`s left open before
//! each of many blocks), its tokenizer checks each attribute against the tag's earlier ones
//! (a tag with 100,000 attributes costs seconds), and a huge page is parsed whole however
//! little of it the model will read. So the page is parsed here, with html5ever's tokenizer
//! feeding its tree builder through a filter ([`Filter`]) that bounds what reaches it:
//!
//! - **bytes in**: at most [`Limits::max_bytes`] of the body are read;
//! - **depth**: while the tree builder holds [`Limits::max_depth`] open and formatting
//!   elements (counted exactly, with html5ever's own tracing of its state), start tags are
//!   dropped and their text kept;
//! - **attributes**: at most [`Limits::max_attrs`] per tag reach the tree;
//! - **text**: once [`Limits::max_text_chars`] characters of text were read (more than the
//!   tool returns), the rest of the page is not parsed;
//! - **size**: once the tree holds [`Limits::max_nodes`] nodes, the rest of the page is not
//!   parsed (the tree builder creates nodes the page did not write; see
//!   [`dom`](super::dom));
//! - **time**: the input is fed in small pieces and the filter checks a deadline before
//!   every token; past [`Limits::deadline`] the rest is dropped.
//!
//! Rendering the tree is not interruptible, but it walks a tree bounded in depth and size.
//! What the bounds cut is reported in [`Cuts`], which the tool shows the model; the work
//! done is counted in [`Work`], so tests bound it without timing anything. The conversion
//! is blocking and runs off the async runtime (the tool calls it through `run_blocking`),
//! inside the sandboxed runner: the controller only fetches bytes and never parses a page.

use std::cell::Cell;
use std::time::{Duration, Instant};

use html5ever::TokenizerResult;
use html5ever::interface::Tracer;
use html5ever::tendril::StrTendril;
use html5ever::tokenizer::{
    BufferQueue, TagKind, Token, TokenSink, TokenSinkResult, Tokenizer, TokenizerOpts,
};
use html5ever::tree_builder::{TreeBuilder, TreeBuilderOpts};

use super::dom::CountedDom;

/// Bounds of one conversion.
#[derive(Clone, Debug, PartialEq)]
pub struct Limits {
    /// Body bytes read; the rest is ignored.
    pub max_bytes: usize,
    /// Open and formatting elements the tree builder may hold; past it, start tags are
    /// dropped.
    pub max_depth: usize,
    /// Attributes kept per tag.
    pub max_attrs: usize,
    /// Characters of text read before the rest of the page is dropped.
    pub max_text_chars: usize,
    /// Nodes in the tree before the rest of the page is dropped.
    pub max_nodes: u64,
    /// Time the parse may take before the rest of the page is dropped.
    pub deadline: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_bytes: 1024 * 1024,
            max_depth: 256,
            max_attrs: 64,
            max_text_chars: 4 * super::MAX_TEXT_CHARS,
            max_nodes: 100_000,
            deadline: Duration::from_secs(5),
        }
    }
}

/// What the bounds cut from a page.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Cuts {
    /// The body's length, when it was longer than `max_bytes`.
    pub bytes: Option<usize>,
    /// Start tags dropped at `max_depth`.
    pub deep_tags: u64,
    /// Tags that lost attributes past `max_attrs`.
    pub crowded_tags: u64,
    /// Whether parsing stopped after `max_text_chars` of text.
    pub text: bool,
    /// Whether parsing stopped at `max_nodes` nodes.
    pub nodes: bool,
    /// Whether parsing stopped at the deadline.
    pub time: bool,
}

impl Cuts {
    /// One line per cut, for the model; empty when nothing was cut.
    pub fn notes(&self, limits: &Limits) -> Vec<String> {
        let mut notes = Vec::new();
        if let Some(total) = self.bytes {
            notes.push(format!(
                "[only the first {} of {total} bytes of HTML were read]",
                limits.max_bytes
            ));
        }
        if self.deep_tags > 0 {
            notes.push(format!(
                "[{} tags nested deeper than {} elements were dropped; their text is kept]",
                self.deep_tags, limits.max_depth
            ));
        }
        if self.crowded_tags > 0 {
            notes.push(format!(
                "[{} tags had more than {} attributes; the rest were dropped]",
                self.crowded_tags, limits.max_attrs
            ));
        }
        if self.text {
            notes.push(format!(
                "[the page was read up to {} characters of text]",
                limits.max_text_chars
            ));
        }
        if self.nodes {
            notes.push(format!(
                "[the page was read up to {} elements]",
                limits.max_nodes
            ));
        }
        if self.time {
            notes.push(format!(
                "[converting the page took longer than {} s; the rest of it was dropped]",
                limits.deadline.as_secs_f64()
            ));
        }
        notes
    }
}

/// The work a conversion did, for tests that bound it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Work {
    /// Tokens that reached the tree builder.
    pub tokens: u64,
    /// Most open and formatting elements the tree builder held before a start tag.
    pub max_depth: usize,
    /// Most attributes on one tag that reached the tree builder.
    pub max_attrs: usize,
    /// Nodes the tree builder created.
    pub nodes: u64,
}

/// A page as text.
#[derive(Clone, Debug, PartialEq)]
pub struct Converted {
    /// The text, wrapped at 100 columns, links as numbered footnotes.
    pub text: String,
    /// What the bounds cut.
    pub cuts: Cuts,
    /// The work done.
    pub work: Work,
}

/// Why a page could not be converted.
#[derive(Debug, thiserror::Error)]
#[error("could not convert the HTML to text: {0}")]
pub struct HtmlError(#[from] html2text::Error);

/// Characters of input fed to the tokenizer at a time, between deadline checks.
const PIECE_CHARS: usize = 1024;
/// Column width the text is wrapped at.
const WIDTH: usize = 100;

/// Converts an HTML body to text within `limits`.
pub fn html_to_text(body: &[u8], limits: &Limits) -> Result<Converted, HtmlError> {
    // A deadline too far to represent is no deadline.
    let deadline = Instant::now().checked_add(limits.deadline);
    let mut cuts = Cuts::default();
    let read = if body.len() > limits.max_bytes {
        cuts.bytes = Some(body.len());
        &body[..limits.max_bytes]
    } else {
        body
    };
    let html = String::from_utf8_lossy(read);
    let builder = TreeBuilder::new(
        CountedDom::default(),
        TreeBuilderOpts {
            scripting_enabled: false,
            ..TreeBuilderOpts::default()
        },
    );
    let filter = Filter::new(builder, limits, deadline);
    let tokenizer = Tokenizer::new(filter, TokenizerOpts::default());
    let queue = BufferQueue::default();
    for piece in pieces(&html, PIECE_CHARS) {
        if tokenizer.sink.stop.get().is_some() {
            break;
        }
        if tokenizer.sink.past_deadline() {
            tokenizer.sink.stop.set(Some(Stop::Time));
            break;
        }
        queue.push_back(StrTendril::from_slice(piece));
        while !matches!(tokenizer.feed(&queue), TokenizerResult::Done) {}
    }
    tokenizer.end();
    let filter = &tokenizer.sink;
    match filter.stop.get() {
        Some(Stop::Text) => cuts.text = true,
        Some(Stop::Nodes) => cuts.nodes = true,
        Some(Stop::Time) => cuts.time = true,
        None => {}
    }
    cuts.deep_tags = filter.deep_tags.get();
    cuts.crowded_tags = filter.crowded_tags.get();
    let work = Work {
        tokens: filter.tokens.get(),
        max_depth: filter.max_depth.get(),
        max_attrs: filter.max_attrs.get(),
        nodes: filter.builder.sink.nodes(),
    };
    let config = html2text::config::plain()
        .no_link_wrapping()
        .allow_width_overflow();
    let tree = config.dom_to_render_tree(&filter.builder.sink.dom)?;
    let text = config.render_to_string(tree, WIDTH)?;
    Ok(Converted { text, cuts, work })
}

/// `text` in pieces of at most `chars` characters.
fn pieces(text: &str, chars: usize) -> impl Iterator<Item = &str> {
    let mut rest = text;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        let end = rest
            .char_indices()
            .nth(chars)
            .map_or(rest.len(), |(at, _)| at);
        let (piece, tail) = rest.split_at(end);
        rest = tail;
        Some(piece)
    })
}

/// Why the filter stopped passing tokens on.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Stop {
    Text,
    Nodes,
    Time,
}

/// Stands between html5ever's tokenizer and its tree builder and passes on only what the
/// limits allow.
struct Filter<'a> {
    builder: TreeBuilder<html2text::Handle, CountedDom>,
    limits: &'a Limits,
    deadline: Option<Instant>,
    stop: Cell<Option<Stop>>,
    /// The tokenizer reads raw text (a script, a style…) until the next end tag.
    in_raw_text: Cell<bool>,
    text_chars: Cell<usize>,
    deep_tags: Cell<u64>,
    crowded_tags: Cell<u64>,
    tokens: Cell<u64>,
    max_depth: Cell<usize>,
    max_attrs: Cell<usize>,
}

impl<'a> Filter<'a> {
    fn new(
        builder: TreeBuilder<html2text::Handle, CountedDom>,
        limits: &'a Limits,
        deadline: Option<Instant>,
    ) -> Self {
        Self {
            builder,
            limits,
            deadline,
            stop: Cell::new(None),
            in_raw_text: Cell::new(false),
            text_chars: Cell::new(0),
            deep_tags: Cell::new(0),
            crowded_tags: Cell::new(0),
            tokens: Cell::new(0),
            max_depth: Cell::new(0),
            max_attrs: Cell::new(0),
        }
    }

    fn past_deadline(&self) -> bool {
        self.deadline
            .is_some_and(|deadline| Instant::now() >= deadline)
    }

    /// The tree builder's open and formatting elements (and the few handles it keeps
    /// besides), counted through its own tracing.
    fn depth(&self) -> usize {
        let counter = Counter(Cell::new(0));
        self.builder.trace_handles(&counter);
        counter.0.get()
    }

    /// Whether `token` may reach the tree builder (after trimming its attributes).
    fn admit(&self, token: &mut Token) -> bool {
        match token {
            Token::TagToken(tag) if tag.kind == TagKind::StartTag => {
                let depth = self.depth();
                self.max_depth.set(self.max_depth.get().max(depth));
                if depth >= self.limits.max_depth {
                    self.deep_tags.set(self.deep_tags.get() + 1);
                    return false;
                }
                if tag.attrs.len() > self.limits.max_attrs {
                    tag.attrs.truncate(self.limits.max_attrs);
                    self.crowded_tags.set(self.crowded_tags.get() + 1);
                }
                self.max_attrs
                    .set(self.max_attrs.get().max(tag.attrs.len()));
                true
            }
            Token::TagToken(_) => {
                self.in_raw_text.set(false);
                true
            }
            Token::CharacterTokens(text) if !self.in_raw_text.get() => {
                let chars = text.chars().filter(|c| !c.is_whitespace()).count();
                self.text_chars.set(self.text_chars.get() + chars);
                if self.text_chars.get() > self.limits.max_text_chars {
                    self.stop.set(Some(Stop::Text));
                }
                true
            }
            _ => true,
        }
    }
}

/// Counts the handles a tree builder traces.
struct Counter(Cell<usize>);

impl Tracer for Counter {
    type Handle = html2text::Handle;

    fn trace_handle(&self, _node: &html2text::Handle) {
        self.0.set(self.0.get() + 1);
    }
}

impl TokenSink for Filter<'_> {
    type Handle = html2text::Handle;

    fn process_token(&self, mut token: Token, line_number: u64) -> TokenSinkResult<Self::Handle> {
        if self.stop.get().is_some() {
            return TokenSinkResult::Continue;
        }
        if self.past_deadline() {
            self.stop.set(Some(Stop::Time));
            return TokenSinkResult::Continue;
        }
        if self.builder.sink.nodes() >= self.limits.max_nodes {
            self.stop.set(Some(Stop::Nodes));
            return TokenSinkResult::Continue;
        }
        if !self.admit(&mut token) {
            return TokenSinkResult::Continue;
        }
        self.tokens.set(self.tokens.get() + 1);
        let result = self.builder.process_token(token, line_number);
        if matches!(
            result,
            TokenSinkResult::RawData(_) | TokenSinkResult::Plaintext
        ) {
            self.in_raw_text.set(true);
        }
        result
    }

    fn end(&self) {
        self.builder.end();
    }

    fn adjusted_current_node_present_but_not_in_html_namespace(&self) -> bool {
        self.builder
            .adjusted_current_node_present_but_not_in_html_namespace()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn convert(html: &str) -> Converted {
        html_to_text(html.as_bytes(), &Limits::default()).unwrap()
    }

    /// The text without whitespace and quote marks: deep indentation wraps words.
    fn squeezed(text: &str) -> String {
        text.chars()
            .filter(|c| !c.is_whitespace() && *c != '>')
            .collect()
    }

    #[test]
    fn ordinary_pages_are_not_cut() {
        let out = convert(
            "<!doctype html><title>T</title><ul><li>one<li>two</ul><p>a<p>b \
             <a href=\"https://x.example\">link</a><table><tr><td>1<td>2</table>",
        );
        assert_eq!(out.cuts, Cuts::default());
        assert!(out.text.contains("* one\n* two"), "{}", out.text);
        assert!(out.text.contains("[1]: https://x.example"), "{}", out.text);
    }

    #[test]
    fn deep_nesting_is_cut_at_the_depth_limit_and_keeps_its_text() {
        for tag in ["div", "ul><li", "b", "table><tr><td", "span", "blockquote"] {
            let n = 20_000;
            let html = format!(
                "{}deep text{}",
                format!("<{tag}>").repeat(n),
                "</div>".repeat(n)
            );
            let out = convert(&html);
            let limits = Limits::default();
            assert!(
                out.work.max_depth <= limits.max_depth,
                "{tag}: {:?}",
                out.work
            );
            assert!(out.cuts.deep_tags > 0, "{tag}");
            assert!(squeezed(&out.text).contains("deeptext"), "{tag}");
            // Every token the tree builder saw is one of the page's, at most.
            assert!(
                out.work.tokens <= 3 * n as u64 + 10,
                "{tag}: {:?}",
                out.work
            );
        }
    }

    #[test]
    fn formatting_left_open_cannot_grow_the_tree() {
        // Every `x` after the `</div>` makes the tree builder reopen each `<b>` still on its
        // list of formatting elements: without the depth bound, 300 new elements per `x`.
        let bs: String = (0..300).map(|i| format!("<b a{i}=v>")).collect();
        let html = format!("<div>{bs}</div>x").repeat(300);
        let out = convert(&html);
        let limits = Limits::default();
        assert!(out.cuts.deep_tags > 0);
        assert!(
            out.work.nodes <= 2 * limits.max_depth as u64,
            "{:?}",
            out.work
        );
        assert_eq!(squeezed(&out.text).matches('x').count(), 300);
    }

    #[test]
    fn deep_lists_do_not_run_out_of_width() {
        // html2text fails with "too narrow" where indentation fills the width, unless it may
        // overflow it.
        let html = format!("{}deep{}", "<ul><li>".repeat(200), "</li></ul>".repeat(200));
        assert!(squeezed(&convert(&html).text).ends_with("deep"));
    }

    #[test]
    fn crowded_tags_keep_only_their_first_attributes() {
        let attrs: String = (0..5_000).map(|i| format!(" a{i}=\"v\"")).collect();
        let first = convert(&format!("<a href=\"https://x.example\"{attrs}>link</a>"));
        assert!(
            first.text.contains("[1]: https://x.example"),
            "{}",
            first.text
        );
        let late = convert(&format!("<a{attrs} href=\"https://x.example\">link</a>"));
        assert!(!late.text.contains("https://x.example"), "{}", late.text);
        assert_eq!(late.cuts.crowded_tags, 1);
        assert_eq!(late.work.max_attrs, Limits::default().max_attrs);
    }

    #[test]
    fn huge_pages_are_read_up_to_the_text_limit() {
        let html = "<p>some words of text</p>\n".repeat(50_000);
        let out = convert(&html);
        assert!(out.cuts.text);
        let limits = Limits::default();
        // Parsing stopped soon after the text limit: far fewer tokens than the page has.
        assert!(out.work.tokens < 30_000, "{:?}", out.work);
        assert!(out.text.chars().count() >= limits.max_text_chars / 2);
        let small = Limits {
            max_bytes: 1_000,
            ..Limits::default()
        };
        let out = html_to_text(html.as_bytes(), &small).unwrap();
        assert_eq!(out.cuts.bytes, Some(html.len()));
        assert!(out.text.matches("some words").count() <= 1_000 / 26 + 1);
    }

    #[test]
    fn a_spent_deadline_stops_the_parse() {
        let limits = Limits {
            deadline: Duration::ZERO,
            ..Limits::default()
        };
        let out = html_to_text(b"<p>never read</p>", &limits).unwrap();
        assert!(out.cuts.time);
        assert_eq!(out.work.tokens, 0);
        assert!(!out.text.contains("never read"));
        assert_eq!(
            out.cuts.notes(&limits),
            vec!["[converting the page took longer than 0 s; the rest of it was dropped]"]
        );
    }

    #[test]
    fn scripts_and_styles_stay_out_and_uncounted() {
        let limits = Limits {
            max_text_chars: 10,
            ..Limits::default()
        };
        let script = "x".repeat(1_000);
        let html = format!("<script>{script}</script><style>{script}</style><p>visible</p>");
        let out = html_to_text(html.as_bytes(), &limits).unwrap();
        assert!(!out.cuts.text);
        assert_eq!(out.text.trim(), "visible");
    }
}
