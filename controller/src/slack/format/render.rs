//! The walk over pulldown-cmark's event stream that writes mrkdwn.
//!
//! pulldown-cmark parses; this module decides what each construct becomes in
//! Slack. [`Renderer`] has one small method per kind of event or tag and
//! keeps only the state that spans events: the open lists (for item
//! numbers), the code block, HTML block or table being collected, and a
//! stack of [`Frame`]s for inline spans whose rendering needs their whole
//! content (a link's label, a heading, an image's alt text, a table cell).
//! Lines and their prefixes are [`Output`]'s business, link syntax
//! [`links`](super::links)', table layout [`Table`]'s, and long code blocks
//! go to [`Snippets`] under a name from [`NameHints`].
//!
//! The answer is parsed with its references replaced by tokens (see
//! [`references`](super::references)); the place a text lands in decides what
//! they become: live references in prose, the answer's own text (escaped
//! where it is mrkdwn) in code, link targets and labels, tables and HTML.
//! Every `<…>` written is issued through [`Markup`] and checked at the end.

use pulldown_cmark::{Alignment, CodeBlockKind, Event, LinkType, Options, Parser, Tag, TagEnd};

use super::escape::{escape, push_guarded};
use super::inert::Markup;
use super::links::{render_image, render_link};
use super::names::NameHints;
use super::output::{Container, Ink, Output, Sep};
use super::references::{References, protect};
use super::snippets::Snippets;
use super::table::Table;
use super::{FENCE, Outgoing, SNIPPET_MIN_LINES};

/// A converted answer.
pub(super) struct Converted {
    /// Text runs and snippets in document order.
    pub(super) pieces: Vec<Outgoing>,
    /// Whether any text other than snippet placeholders was written.
    pub(super) has_text: bool,
    /// The markup written, for the final check.
    pub(super) markup: Markup,
}

/// Converts Markdown to mrkdwn, taking long code blocks out as snippets
/// when `extract_snippets`.
pub(super) fn convert(markdown: &str, extract_snippets: bool) -> Converted {
    let options = Options::ENABLE_STRIKETHROUGH | Options::ENABLE_TABLES;
    let (protected, refs) = protect(markdown);
    let mut renderer = Renderer::new(extract_snippets, refs);
    for event in Parser::new_ext(&protected, options) {
        renderer.event(event);
    }
    renderer.finish()
}

/// An inline span whose rendering needs its whole content (link label,
/// heading, image alt text, table cell).
struct Frame {
    kind: FrameKind,
    /// Rendered content (escaped mrkdwn, or raw text inside table cells).
    buf: String,
    /// Unformatted text as the answer wrote it, to recognise autolinks and addresses.
    raw: String,
}

enum FrameKind {
    Link { url: String, link_type: LinkType },
    Image { url: String },
    Heading,
    Cell,
}

impl Frame {
    fn new(kind: FrameKind) -> Self {
        Self {
            kind,
            buf: String::new(),
            raw: String::new(),
        }
    }
}

/// A fenced or indented code block being collected.
struct CodeBlock {
    /// Fence language, lower-cased; empty when none.
    lang: String,
    content: String,
}

struct Renderer {
    extract_snippets: bool,
    /// Resolves the answer's reference tokens.
    refs: References,
    /// Every `<…>` written.
    markup: Markup,
    /// Consecutive text events, merged before they are written.
    pending: String,
    out: Output,
    /// Open lists: the next item number for ordered ones.
    lists: Vec<Option<u64>>,
    frames: Vec<Frame>,
    code: Option<CodeBlock>,
    html: Option<String>,
    table: Option<Table>,
    hints: NameHints,
    snippets: Snippets,
}

impl Renderer {
    fn new(extract_snippets: bool, refs: References) -> Self {
        Self {
            extract_snippets,
            refs,
            markup: Markup::default(),
            pending: String::new(),
            out: Output::new(),
            lists: Vec::new(),
            frames: Vec::new(),
            code: None,
            html: None,
            table: None,
            hints: NameHints::default(),
            snippets: Snippets::default(),
        }
    }

    fn event(&mut self, event: Event<'_>) {
        if let Event::Text(text) = &event {
            self.pending.push_str(text);
            return;
        }
        self.flush_text();
        match event {
            Event::Start(tag) => self.start(tag),
            Event::End(tag) => self.end(tag),
            Event::Text(text) => self.text(&text),
            Event::Code(code) => self.inline_code(&code),
            Event::InlineMath(math) | Event::DisplayMath(math) => self.literal(&math),
            Event::Html(html) => self.html(&html),
            Event::InlineHtml(html) => self.literal(&html),
            Event::FootnoteReference(label) => self.literal(&format!("[{label}]")),
            Event::SoftBreak | Event::HardBreak => self.line_break(),
            Event::Rule => self.rule(),
            Event::TaskListMarker(done) => self.text(if done { "☑ " } else { "☐ " }),
        }
    }

    fn start(&mut self, tag: Tag<'_>) {
        match tag {
            Tag::Paragraph
            | Tag::FootnoteDefinition(_)
            | Tag::DefinitionList
            | Tag::DefinitionListTitle
            | Tag::DefinitionListDefinition
            | Tag::MetadataBlock(_) => self.start_block(),
            Tag::Heading { .. } => self.start_heading(),
            Tag::BlockQuote(_) => self.start_quote(),
            Tag::CodeBlock(kind) => self.start_code_block(&kind),
            Tag::HtmlBlock => self.start_html_block(),
            Tag::List(start) => self.start_list(start),
            Tag::Item => self.start_item(),
            Tag::Table(aligns) => self.start_table(aligns),
            Tag::TableHead | Tag::TableRow => self.start_row(),
            Tag::TableCell => self.frames.push(Frame::new(FrameKind::Cell)),
            Tag::Emphasis => self.marker("_"),
            Tag::Strong => self.strong(),
            Tag::Strikethrough => self.marker("~"),
            Tag::Link {
                link_type,
                dest_url,
                ..
            } => self.frames.push(Frame::new(FrameKind::Link {
                url: self.refs.plain(&dest_url),
                link_type,
            })),
            Tag::Image { dest_url, .. } => self.frames.push(Frame::new(FrameKind::Image {
                url: self.refs.plain(&dest_url),
            })),
            Tag::Superscript | Tag::Subscript => {}
        }
    }

    fn end(&mut self, tag: TagEnd) {
        match tag {
            TagEnd::Paragraph
            | TagEnd::FootnoteDefinition
            | TagEnd::DefinitionList
            | TagEnd::DefinitionListTitle
            | TagEnd::DefinitionListDefinition
            | TagEnd::MetadataBlock(_) => self.hints.end_block(),
            TagEnd::Heading(_) => self.end_heading(),
            TagEnd::BlockQuote(_) | TagEnd::Item => self.end_container(),
            TagEnd::CodeBlock => self.end_code_block(),
            TagEnd::HtmlBlock => self.end_html_block(),
            TagEnd::List(_) => self.end_list(),
            TagEnd::Table => self.end_table(),
            TagEnd::TableHead | TagEnd::TableRow => self.end_row(),
            TagEnd::TableCell => self.end_cell(),
            TagEnd::Emphasis => self.marker("_"),
            TagEnd::Strong => self.strong(),
            TagEnd::Strikethrough => self.marker("~"),
            TagEnd::Link => self.end_link(),
            TagEnd::Image => self.end_image(),
            TagEnd::Superscript | TagEnd::Subscript => {}
        }
    }

    // ----- blocks -----

    /// Ends the previous block's text and asks for a separator before this
    /// one: a blank line, or a single line break inside lists.
    fn start_block(&mut self) {
        self.hints.end_block();
        let sep = if self.lists.is_empty() {
            Sep::Blank
        } else {
            Sep::Line
        };
        self.out.request(sep);
    }

    fn start_heading(&mut self) {
        self.start_block();
        self.frames.push(Frame::new(FrameKind::Heading));
    }

    /// Writes a heading as a bold line (Slack has no headings).
    fn end_heading(&mut self) {
        self.hints.end_heading();
        if let Some(frame) = self.frames.pop() {
            let content = frame.buf.trim();
            if !content.is_empty() {
                self.emit(&format!("*{content}*"));
            }
        }
    }

    fn start_quote(&mut self) {
        self.start_block();
        self.out.push_container(Container::Quote);
    }

    /// Ends a block quote or a list item.
    fn end_container(&mut self) {
        self.hints.end_block();
        self.out.pop_container();
    }

    fn start_list(&mut self, start: Option<u64>) {
        self.start_block();
        self.lists.push(start);
    }

    fn end_list(&mut self) {
        self.hints.end_block();
        self.lists.pop();
    }

    /// Opens an item with the next number of an ordered list, or a bullet.
    fn start_item(&mut self) {
        self.start_block();
        let marker = match self.lists.last_mut() {
            Some(Some(number)) => {
                let marker = format!("{number}. ");
                *number += 1;
                marker
            }
            _ => "• ".to_string(),
        };
        self.out.push_container(Container::Item {
            marker,
            started: false,
        });
    }

    fn rule(&mut self) {
        self.start_block();
        self.emit("———");
    }

    // ----- code and HTML blocks -----

    fn start_code_block(&mut self, kind: &CodeBlockKind<'_>) {
        self.start_block();
        self.code = Some(CodeBlock {
            lang: self.refs.plain(&fence_lang(kind)),
            content: String::new(),
        });
    }

    /// Writes the collected code block, or extracts it as a snippet if it is
    /// long enough.
    fn end_code_block(&mut self) {
        let Some(mut code) = self.code.take() else {
            return;
        };
        code.content = self.refs.plain(&code.content);
        if self.extract_snippets && code.content.lines().count() >= SNIPPET_MIN_LINES {
            self.extract_snippet(code);
        } else {
            self.emit_code_block(&escape(&code.content));
        }
        self.hints.end_code_block();
    }

    /// Leaves a placeholder line, ends the current text run there and adds
    /// the code as a snippet after it.
    fn extract_snippet(&mut self, code: CodeBlock) {
        let (name, filetype) = self.hints.infer(&code.lang);
        let placeholder = self.snippets.placeholder(&name);
        self.write(&placeholder, Ink::Placeholder);
        let text = self.out.take_text();
        self.snippets.push(
            text,
            Outgoing::Snippet {
                filename: name,
                filetype,
                content: code.content,
            },
        );
    }

    /// Writes a fenced block (already escaped), without list indentation.
    fn emit_code_block(&mut self, body: &str) {
        self.out.set_raw_block(true);
        self.write(FENCE, Ink::Fence);
        self.write("\n", Ink::Fence);
        if !body.is_empty() {
            self.write(body, Ink::Text);
            if !body.ends_with('\n') {
                self.write("\n", Ink::Text);
            }
        }
        self.write(FENCE, Ink::Fence);
        self.out.set_raw_block(false);
    }

    fn start_html_block(&mut self) {
        self.start_block();
        self.html = Some(String::new());
    }

    fn html(&mut self, html: &str) {
        match self.html.as_mut() {
            Some(buf) => buf.push_str(html),
            None => self.literal(html),
        }
    }

    /// Writes an HTML block as escaped text.
    fn end_html_block(&mut self) {
        if let Some(html) = self.html.take() {
            let html = self.refs.plain(&html);
            let html = html.trim_end();
            self.hints.push_text(html);
            self.hints.end_block();
            if !html.is_empty() {
                self.emit(&escape(html));
            }
        }
    }

    // ----- tables -----

    fn start_table(&mut self, aligns: Vec<Alignment>) {
        self.start_block();
        self.table = Some(Table::new(aligns));
    }

    fn start_row(&mut self) {
        if let Some(table) = self.table.as_mut() {
            table.start_row();
        }
    }

    fn end_cell(&mut self) {
        if let Some(frame) = self.frames.pop() {
            if let Some(table) = self.table.as_mut() {
                table.push_cell(frame.buf.trim().to_string());
            }
        }
    }

    fn end_row(&mut self) {
        if let Some(table) = self.table.as_mut() {
            table.end_row();
        }
    }

    /// Writes the collected table as a code block of aligned columns.
    fn end_table(&mut self) {
        self.hints.end_block();
        if let Some(table) = self.table.take() {
            let rendered = table.render();
            self.emit_code_block(&rendered);
        }
    }

    // ----- inline -----

    /// Writes the text events collected so far.
    fn flush_text(&mut self) {
        if !self.pending.is_empty() {
            let text = std::mem::take(&mut self.pending);
            self.text(&text);
        }
    }

    /// Prose: its references become live markup, unless it is a link's label or an
    /// image's alt text (which are inside markup already) or a table cell (plain text).
    fn text(&mut self, text: &str) {
        if self.collect_raw(text) {
            return;
        }
        if self.in_link() || self.in_cell() {
            let plain = self.refs.plain(text);
            self.write_plain(&plain);
            return;
        }
        let plain = self.refs.plain(text);
        self.hints.push_text(&plain);
        if let Some(frame) = self.frames.last_mut() {
            frame.raw.push_str(&plain);
        }
        let mrkdwn = self.refs.mrkdwn(text, &mut self.markup);
        self.emit(&mrkdwn);
    }

    /// Text that is never markup (inline HTML, math, footnote labels): written as the
    /// answer wrote it, escaped.
    fn literal(&mut self, text: &str) {
        if self.collect_raw(text) {
            return;
        }
        let plain = self.refs.plain(text);
        self.write_plain(&plain);
    }

    /// Adds `text` to the code block or HTML block being collected, if one is.
    fn collect_raw(&mut self, text: &str) -> bool {
        if let Some(code) = self.code.as_mut() {
            code.content.push_str(text);
            return true;
        }
        if let Some(html) = self.html.as_mut() {
            html.push_str(text);
            return true;
        }
        false
    }

    /// Writes plain text: as is in a table cell (the table escapes it), escaped elsewhere.
    fn write_plain(&mut self, plain: &str) {
        self.hints.push_text(plain);
        if let Some(frame) = self.frames.last_mut() {
            frame.raw.push_str(plain);
        }
        if self.in_cell() {
            self.emit(plain);
        } else {
            self.emit(&escape(plain));
        }
    }

    fn inline_code(&mut self, code: &str) {
        let code = self.refs.plain(code);
        self.hints.push_code(&code);
        if let Some(frame) = self.frames.last_mut() {
            frame.raw.push_str(&code);
        }
        if self.in_cell() {
            self.emit(&code);
        } else {
            self.emit(&format!("`{}`", escape(&code)));
        }
    }

    /// A soft or hard break: a new line, or a space inside a frame.
    fn line_break(&mut self) {
        if let Some(code) = self.code.as_mut() {
            code.content.push('\n');
            return;
        }
        self.hints.push_break();
        match self.frames.last_mut() {
            Some(frame) => {
                frame.raw.push(' ');
                self.emit(" ");
            }
            None => self.emit("\n"),
        }
    }

    /// Bold, except in headings (which are bold already).
    fn strong(&mut self) {
        if !self.in_heading() {
            self.marker("*");
        }
    }

    /// An emphasis marker, except in table cells (plain text).
    fn marker(&mut self, marker: &str) {
        if !self.in_cell() {
            self.emit(marker);
        }
    }

    /// Writes a link; one inside another link's label (pulldown-cmark lets autolinks be)
    /// or in a table cell is just its label.
    fn end_link(&mut self) {
        let Some(frame) = self.pop_frame() else {
            return;
        };
        let FrameKind::Link { url, link_type } = frame.kind else {
            return;
        };
        let label = frame.buf.trim();
        if self.in_cell() || self.in_link() {
            self.emit(label);
            return;
        }
        let rendered = render_link(&url, link_type, label, &frame.raw, &mut self.markup);
        self.emit(&rendered);
    }

    fn end_image(&mut self) {
        let Some(frame) = self.pop_frame() else {
            return;
        };
        let FrameKind::Image { url } = frame.kind else {
            return;
        };
        let alt = frame.buf.trim();
        if self.in_cell() || self.in_link() {
            self.emit(alt);
            return;
        }
        let rendered = render_image(&url, alt, &frame.raw, &mut self.markup);
        self.emit(&rendered);
    }

    /// Closes the innermost frame; its plain text is part of the enclosing one's too (an
    /// outer link's label shows what an inner link or image showed).
    fn pop_frame(&mut self) -> Option<Frame> {
        let frame = self.frames.pop()?;
        if let Some(parent) = self.frames.last_mut() {
            parent.raw.push_str(&frame.raw);
        }
        Some(frame)
    }

    fn in_cell(&self) -> bool {
        self.frames
            .iter()
            .any(|f| matches!(f.kind, FrameKind::Cell))
    }

    fn in_heading(&self) -> bool {
        self.frames
            .iter()
            .any(|f| matches!(f.kind, FrameKind::Heading))
    }

    /// Inside a link's label or an image's alt text.
    fn in_link(&self) -> bool {
        self.frames
            .iter()
            .any(|f| matches!(f.kind, FrameKind::Link { .. } | FrameKind::Image { .. }))
    }

    // ----- writing -----

    fn emit(&mut self, text: &str) {
        self.write(text, Ink::Text);
    }

    /// Writes into the innermost frame if one is open, else to the output.
    fn write(&mut self, text: &str, ink: Ink) {
        match self.frames.last_mut() {
            Some(frame) => push_guarded(&mut frame.buf, text, ink == Ink::Fence),
            None => self.out.write(text, ink),
        }
    }

    fn finish(mut self) -> Converted {
        self.flush_text();
        let has_text = self.out.has_text();
        let tail = self.out.into_text();
        Converted {
            pieces: self.snippets.finish(tail),
            has_text,
            markup: self.markup,
        }
    }
}

/// The language of a code block: the first word of a fence's info string,
/// lower-cased; empty for indented blocks.
fn fence_lang(kind: &CodeBlockKind<'_>) -> String {
    match kind {
        CodeBlockKind::Fenced(info) => info
            .split(|c: char| c.is_whitespace() || c == ',' || c == '{')
            .next()
            .unwrap_or_default()
            .to_ascii_lowercase(),
        CodeBlockKind::Indented => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use crate::slack::format::markdown_to_mrkdwn;

    #[test]
    fn bold_both_syntaxes() {
        assert_eq!(
            markdown_to_mrkdwn("a **bold** and __also__ b"),
            "a *bold* and *also* b"
        );
    }

    #[test]
    fn italic_both_syntaxes() {
        assert_eq!(markdown_to_mrkdwn("*one* and _two_"), "_one_ and _two_");
    }

    #[test]
    fn bold_italic_and_strikethrough() {
        assert_eq!(markdown_to_mrkdwn("***both*** ~~gone~~"), "_*both*_ ~gone~");
    }

    #[test]
    fn headings_any_level() {
        assert_eq!(
            markdown_to_mrkdwn("# Title\n\nBody.\n\n### Sub **x**\nmore"),
            "*Title*\n\nBody.\n\n*Sub x*\n\nmore"
        );
    }

    #[test]
    fn inline_code_kept_and_escaped() {
        assert_eq!(
            markdown_to_mrkdwn("run `a < b && c` now"),
            "run `a &lt; b &amp;&amp; c` now"
        );
    }

    #[test]
    fn code_block_verbatim_without_language() {
        let md = "Here:\n\n```rust\nfn main() {\n    let x = 1 < 2;\n\n    println!(\"&\");\n}\n```\n\nDone.";
        assert_eq!(
            markdown_to_mrkdwn(md),
            "Here:\n\n```\nfn main() {\n    let x = 1 &lt; 2;\n\n    println!(\"&amp;\");\n}\n```\n\nDone."
        );
    }
}
