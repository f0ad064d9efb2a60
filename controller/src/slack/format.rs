//! Markdown → Slack formatting: turns a model's Markdown answer into the
//! messages (and snippet uploads) we post in a Slack thread.
//!
//! Models answer in CommonMark, but Slack speaks its own "mrkdwn" dialect
//! (`*bold*`, `_italic_`, `<url|text>`, no headings or tables, `&`/`<`/`>`
//! must be escaped) and rejects messages over ~4,000 characters. This module
//! owns that translation, so the rest of the daemon can hand it an answer and
//! post whatever comes back, in order:
//!
//! - [`markdown_to_mrkdwn`] converts the syntax, walking pulldown-cmark's
//!   event stream and writing mrkdwn itself;
//! - [`split_message`] cuts mrkdwn into chunks under a size limit without
//!   ever leaving a ```` ``` ```` code fence unbalanced;
//! - [`render_reply`] does both, and additionally takes long code blocks out
//!   of the text as [`Outgoing::Snippet`] file uploads (with a file name
//!   inferred from the surrounding prose or the fence's language).
//!
//! Tables (the GFM extension is enabled) are rendered as a code block of
//! aligned columns, since Slack has no table syntax.

use std::collections::HashMap;

use pulldown_cmark::{Alignment, CodeBlockKind, Event, LinkType, Options, Parser, Tag, TagEnd};

/// Size limit for one Slack message, in characters (Slack recommends staying
/// under 4,000).
pub const MAX_MESSAGE_CHARS: usize = 3900;

/// Code blocks with at least this many lines are uploaded as snippets instead
/// of being posted inline.
pub const SNIPPET_MIN_LINES: usize = 20;

/// Smallest limit [`split_message`] works with: a chunk that continues a code
/// block needs room for a reopening and a closing fence plus some content.
const MIN_SPLIT_CHARS: usize = 32;

/// Longest quote prefix (`"> "`, …) that is repeated on reopened fences.
const MAX_FENCE_PREFIX: usize = 8;

const FENCE: &str = "```";

/// Zero-width space, used to break accidental runs of three backticks.
const ZWSP: char = '\u{200B}';

/// Marks where a snippet's final file name goes in the text (pulldown-cmark
/// replaces NUL in its input, so it cannot collide with the answer's text).
const MARK: char = '\u{0}';

/// One piece of output for a Slack thread.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outgoing {
    /// A chat message in Slack mrkdwn, under the size limit.
    Text(String),
    /// A long code block to upload as a snippet file into the thread.
    Snippet {
        /// File name shown in Slack, e.g. `session.rs` or `snippet.py`.
        filename: String,
        /// Slack file type, e.g. `rust`, `python`, `text`.
        filetype: String,
        /// The code, verbatim (not escaped).
        content: String,
    },
}

/// Splits and converts a Markdown answer, prefixing the first text message
/// with `prefix` (e.g. `"*PM:* "`).
///
/// Code blocks of [`SNIPPET_MIN_LINES`] lines or more become
/// [`Outgoing::Snippet`]s placed where they occurred (after the text that
/// preceded them), with a short `_(code uploaded as NAME)_` line left in the
/// text. Every text run is split with [`split_message`] at
/// [`MAX_MESSAGE_CHARS`]. A blank answer yields `prefix` + `_(no answer)_`;
/// an answer that is only code yields `prefix` + `_(see the snippet below)_`
/// followed by the snippets.
pub fn render_reply(markdown: &str, prefix: &str) -> Vec<Outgoing> {
    let no_answer = || vec![Outgoing::Text(format!("{prefix}_(no answer)_"))];
    if markdown.trim().is_empty() {
        return no_answer();
    }
    let converted = convert(markdown, true);
    let snippets = converted
        .pieces
        .iter()
        .filter(|p| matches!(p, Outgoing::Snippet { .. }))
        .count();
    if !converted.has_text {
        if snippets == 0 {
            return no_answer();
        }
        let note = if snippets == 1 {
            "_(see the snippet below)_"
        } else {
            "_(see the snippets below)_"
        };
        let mut out = vec![Outgoing::Text(format!("{prefix}{note}"))];
        out.extend(
            converted
                .pieces
                .into_iter()
                .filter(|p| matches!(p, Outgoing::Snippet { .. })),
        );
        return out;
    }

    // The prefix may be followed by a line break, hence the `+ 1`.
    let first_limit = MAX_MESSAGE_CHARS.saturating_sub(prefix.chars().count() + 1);
    let mut out = Vec::new();
    let mut prefixed = false;
    for piece in converted.pieces {
        match piece {
            Outgoing::Text(text) => {
                let limit = if prefixed {
                    MAX_MESSAGE_CHARS
                } else {
                    first_limit
                };
                for chunk in split_message(&text, limit) {
                    if prefixed {
                        out.push(Outgoing::Text(chunk));
                    } else {
                        out.push(Outgoing::Text(with_prefix(prefix, &chunk)));
                        prefixed = true;
                    }
                }
            }
            snippet @ Outgoing::Snippet { .. } => out.push(snippet),
        }
    }
    out
}

/// Converts Markdown to Slack mrkdwn, keeping every code block inline.
///
/// Bold → `*b*`, italic → `_i_`, strikethrough → `~s~`, links and images →
/// `<url|text>`, headings → a `*Heading*` line, lists → `• item` / `1. item`
/// (nested levels indented by 4 spaces), block quotes → `> ` lines, rules →
/// `———`, fenced code → a bare ```` ``` ```` block, tables → a code block of
/// aligned columns. `&`, `<` and `>` in text and code are escaped as Slack
/// requires.
pub fn markdown_to_mrkdwn(markdown: &str) -> String {
    let mut text = String::new();
    for piece in convert(markdown, false).pieces {
        if let Outgoing::Text(t) = piece {
            text.push_str(&t);
        }
    }
    text
}

/// Splits mrkdwn into chunks of at most `max_chars` characters.
///
/// Cuts preferably at blank lines (paragraph boundaries), then at line
/// boundaries, and only inside a ```` ``` ```` code block when the block alone
/// does not fit: then each chunk closes the block with ```` ``` ```` and the
/// next one reopens it, so every chunk has balanced fences. A single line
/// longer than the limit is cut at a character boundary as a last resort.
/// Chunks are never empty and carry no leading or trailing blank lines.
/// Limits below 32 characters are treated as 32 (room for the fences).
pub fn split_message(mrkdwn: &str, max_chars: usize) -> Vec<String> {
    let max = max_chars.max(MIN_SPLIT_CHARS);
    let mut lines: Vec<String> = mrkdwn
        .split('\n')
        .map(|l| l.strip_suffix('\r').unwrap_or(l).to_string())
        .collect();
    let mut chunks = Vec::new();
    let mut i = 0;
    // `Some(prefix)` while position `i` is inside a code block.
    let mut open: Option<String> = None;

    while i < lines.len() {
        if open.is_none() {
            while lines.get(i).is_some_and(|l| is_blank(l)) {
                i += 1;
            }
            if i >= lines.len() {
                break;
            }
        }
        let reopen_len = open.as_deref().map_or(0, |p| fence_chars(p) + 1);

        // Find the best cut after line k, for every k whose chunk fits.
        let mut best: Option<(i8, usize, Option<String>)> = None;
        let mut state = open.clone();
        let mut len = reopen_len;
        for k in i..lines.len() {
            let line = &lines[k];
            len += line.chars().count() + usize::from(k > i);
            if len > max {
                break;
            }
            let before_in_code = state.is_some();
            state = toggle_fences(state, line);
            let close_len = state.as_deref().map_or(0, |p| fence_chars(p) + 1);
            if len + close_len > max {
                continue;
            }
            let next = lines.get(k + 1);
            let priority: i8 = match (&state, next) {
                (_, None) => 3,
                (None, Some(next)) if is_blank(line) || is_blank(next) => 2,
                (None, Some(_)) => 1,
                // Inside a code block: avoid leaving an empty block behind.
                (Some(_), Some(next)) if !before_in_code || fence_count(next) % 2 == 1 => -1,
                (Some(_), Some(_)) => 0,
            };
            if best.as_ref().is_none_or(|(p, _, _)| priority >= *p) {
                best = Some((priority, k + 1, state.clone()));
            }
        }

        let reopen = open.as_deref().map(|p| format!("{p}{FENCE}\n"));
        match best {
            Some((_, end, end_state)) => {
                let mut last = end;
                if end_state.is_none() {
                    while last > i && is_blank(&lines[last - 1]) {
                        last -= 1;
                    }
                }
                let body = lines[i..last].join("\n");
                if let Some(chunk) = assemble(reopen, &body, end_state.as_deref()) {
                    chunks.push(chunk);
                }
                i = end;
                open = end_state;
            }
            None => {
                // Line `i` alone does not fit: cut it (last resort).
                let reserve = MAX_FENCE_PREFIX + FENCE.len() + 1;
                let avail = max.saturating_sub(reopen_len + reserve).max(1);
                let line = std::mem::take(&mut lines[i]);
                let (head, tail) = cut_line(&line, avail, open.is_none());
                let after = toggle_fences(open.clone(), head);
                let head = if after.is_none() {
                    head.trim_end()
                } else {
                    head
                };
                if let Some(chunk) = assemble(reopen, head, after.as_deref()) {
                    chunks.push(chunk);
                }
                lines[i] = tail.to_string();
                open = after;
            }
        }
    }
    chunks
}

/// `reopen` + `body` + a closing fence if the chunk ends inside code; `None`
/// when that would be blank.
fn assemble(reopen: Option<String>, body: &str, end_open: Option<&str>) -> Option<String> {
    let mut chunk = reopen.unwrap_or_default();
    chunk.push_str(body);
    if let Some(prefix) = end_open {
        chunk.push('\n');
        chunk.push_str(prefix);
        chunk.push_str(FENCE);
    }
    (!chunk.trim().is_empty()).then_some(chunk)
}

/// Splits a too-long line after at most `avail` characters (at least one,
/// never all of it). Prose is cut after a space when one is near the limit.
fn cut_line(line: &str, avail: usize, prose: bool) -> (&str, &str) {
    let chars: Vec<(usize, char)> = line.char_indices().collect();
    let total = chars.len();
    let mut cut = avail.min(total.saturating_sub(1)).max(1);
    let is_char = |idx: usize, want: char| chars.get(idx).is_some_and(|&(_, c)| c == want);
    if prose {
        if let Some(pos) = (avail / 2 + 1..=cut).rev().find(|&c| is_char(c - 1, ' ')) {
            cut = pos;
        }
    }
    // Do not cut through a run of backticks (it may be a fence).
    let mut back = cut;
    while back > 0 && is_char(back - 1, '`') && is_char(back, '`') {
        back -= 1;
    }
    if back > 0 {
        cut = back;
    }
    let byte = chars.get(cut).map_or(line.len(), |&(b, _)| b);
    line.split_at(byte)
}

fn is_blank(line: &str) -> bool {
    line.trim().is_empty()
}

fn fence_count(line: &str) -> usize {
    line.matches(FENCE).count()
}

fn fence_chars(prefix: &str) -> usize {
    prefix.chars().count() + FENCE.len()
}

/// Code-block state after `line`: an odd number of fences flips it. When a
/// block opens, its quote prefix (`"> "`) is remembered for reopening.
fn toggle_fences(state: Option<String>, line: &str) -> Option<String> {
    if fence_count(line) % 2 == 0 {
        return state;
    }
    match state {
        Some(_) => None,
        None => {
            let before = line.rfind(FENCE).map_or("", |at| &line[..at]);
            let quote_only = before.chars().all(|c| c == '>' || c.is_whitespace())
                && before.chars().count() <= MAX_FENCE_PREFIX;
            Some(if quote_only { before } else { "" }.to_string())
        }
    }
}

/// Puts the reply prefix before the first chunk; block syntax that must start
/// a line (fences, quotes, list items) goes on the next line.
fn with_prefix(prefix: &str, chunk: &str) -> String {
    if prefix.is_empty() {
        return chunk.to_string();
    }
    let digits = chunk.chars().take_while(char::is_ascii_digit).count();
    let ordered_item = digits > 0 && chunk[digits..].starts_with(". ");
    let block_start = chunk.starts_with(FENCE)
        || chunk.starts_with('>')
        || chunk.starts_with('•')
        || ordered_item;
    if block_start {
        format!("{}\n{chunk}", prefix.trim_end())
    } else {
        format!("{prefix}{chunk}")
    }
}

/// Escapes the three characters Slack treats as control characters.
fn escape(text: &str) -> String {
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
fn push_guarded(buf: &mut String, text: &str, fence: bool) {
    for c in text.chars() {
        if c == '`' && !fence && buf.ends_with("``") {
            buf.push(ZWSP);
        }
        buf.push(c);
    }
}

// ---------------------------------------------------------------------------
// Conversion

struct Converted {
    /// Text runs and snippets in document order.
    pieces: Vec<Outgoing>,
    /// Whether any text other than snippet placeholders was written.
    has_text: bool,
}

fn convert(markdown: &str, extract_snippets: bool) -> Converted {
    let options = Options::ENABLE_STRIKETHROUGH | Options::ENABLE_TABLES;
    let mut writer = Writer::new(extract_snippets);
    for event in Parser::new_ext(markdown, options) {
        writer.event(event);
    }
    writer.finish()
}

/// Separator owed before the next block's first character.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Sep {
    None,
    Line,
    Blank,
}

/// A block that prefixes each of its lines.
enum Container {
    Quote,
    Item { marker: String, started: bool },
}

/// An inline span whose rendering needs its whole content (link label,
/// heading, image alt text, table cell).
struct Frame {
    kind: FrameKind,
    /// Rendered content (escaped mrkdwn, or raw text inside table cells).
    buf: String,
    /// Unformatted text, to recognise autolinks.
    raw: String,
}

enum FrameKind {
    Link { url: String, link_type: LinkType },
    Image { url: String },
    Heading,
    Cell,
}

struct CodeBlock {
    lang: String,
    content: String,
}

struct Table {
    aligns: Vec<Alignment>,
    rows: Vec<Vec<String>>,
    row: Vec<String>,
}

struct Writer {
    extract_snippets: bool,
    pieces: Vec<Outgoing>,
    out: String,
    at_line_start: bool,
    pending: Sep,
    containers: Vec<Container>,
    /// Open lists: the next item number for ordered ones.
    lists: Vec<Option<u64>>,
    frames: Vec<Frame>,
    code: Option<CodeBlock>,
    html: Option<String>,
    table: Option<Table>,
    /// Writing a code block or table: no list indentation.
    raw_block: bool,
    writing_placeholder: bool,
    has_text: bool,
    /// Plain text of the current leaf block (for file name inference).
    block_text: String,
    /// Plain text of the last two text blocks since the last code block.
    recent: Vec<String>,
    last_heading: Option<String>,
    /// Inferred (not yet de-duplicated) snippet names, in order.
    snippet_names: Vec<String>,
}

impl Writer {
    fn new(extract_snippets: bool) -> Self {
        Self {
            extract_snippets,
            pieces: Vec::new(),
            out: String::new(),
            at_line_start: true,
            pending: Sep::None,
            containers: Vec::new(),
            lists: Vec::new(),
            frames: Vec::new(),
            code: None,
            html: None,
            table: None,
            raw_block: false,
            writing_placeholder: false,
            has_text: false,
            block_text: String::new(),
            recent: Vec::new(),
            last_heading: None,
            snippet_names: Vec::new(),
        }
    }

    fn event(&mut self, event: Event<'_>) {
        match event {
            Event::Start(tag) => self.start(tag),
            Event::End(tag) => self.end(tag),
            Event::Text(text) => self.text(&text),
            Event::Code(code) => self.inline_code(&code),
            Event::InlineMath(math) | Event::DisplayMath(math) => self.text(&math),
            Event::Html(html) => match self.html.as_mut() {
                Some(buf) => buf.push_str(&html),
                None => self.text(&html),
            },
            Event::InlineHtml(html) => self.text(&html),
            Event::FootnoteReference(label) => self.text(&format!("[{label}]")),
            Event::SoftBreak | Event::HardBreak => self.line_break(),
            Event::Rule => {
                self.flush_block_text();
                self.begin_block();
                self.emit("———");
            }
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
            | Tag::MetadataBlock(_) => {
                self.flush_block_text();
                self.begin_block();
            }
            Tag::Heading { .. } => {
                self.flush_block_text();
                self.begin_block();
                self.frames.push(Frame::new(FrameKind::Heading));
            }
            Tag::BlockQuote(_) => {
                self.flush_block_text();
                self.begin_block();
                self.containers.push(Container::Quote);
            }
            Tag::CodeBlock(kind) => {
                self.flush_block_text();
                self.begin_block();
                let lang = match kind {
                    CodeBlockKind::Fenced(info) => info
                        .split(|c: char| c.is_whitespace() || c == ',' || c == '{')
                        .next()
                        .unwrap_or_default()
                        .to_ascii_lowercase(),
                    CodeBlockKind::Indented => String::new(),
                };
                self.code = Some(CodeBlock {
                    lang,
                    content: String::new(),
                });
            }
            Tag::HtmlBlock => {
                self.flush_block_text();
                self.begin_block();
                self.html = Some(String::new());
            }
            Tag::List(start) => {
                self.flush_block_text();
                self.begin_block();
                self.lists.push(start);
            }
            Tag::Item => {
                self.flush_block_text();
                self.begin_block();
                let marker = match self.lists.last_mut() {
                    Some(Some(number)) => {
                        let marker = format!("{number}. ");
                        *number += 1;
                        marker
                    }
                    _ => "• ".to_string(),
                };
                self.containers.push(Container::Item {
                    marker,
                    started: false,
                });
            }
            Tag::Table(aligns) => {
                self.flush_block_text();
                self.begin_block();
                self.table = Some(Table {
                    aligns,
                    rows: Vec::new(),
                    row: Vec::new(),
                });
            }
            Tag::TableHead | Tag::TableRow => {
                if let Some(table) = self.table.as_mut() {
                    table.row.clear();
                }
            }
            Tag::TableCell => self.frames.push(Frame::new(FrameKind::Cell)),
            Tag::Emphasis => self.marker("_"),
            Tag::Strong => {
                if !self.in_heading() {
                    self.marker("*");
                }
            }
            Tag::Strikethrough => self.marker("~"),
            Tag::Link {
                link_type,
                dest_url,
                ..
            } => self.frames.push(Frame::new(FrameKind::Link {
                url: dest_url.to_string(),
                link_type,
            })),
            Tag::Image { dest_url, .. } => self.frames.push(Frame::new(FrameKind::Image {
                url: dest_url.to_string(),
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
            | TagEnd::MetadataBlock(_) => self.flush_block_text(),
            TagEnd::Heading(_) => {
                if !is_blank(&self.block_text) {
                    self.last_heading = Some(self.block_text.clone());
                }
                self.flush_block_text();
                if let Some(frame) = self.frames.pop() {
                    let content = frame.buf.trim();
                    if !content.is_empty() {
                        self.emit(&format!("*{content}*"));
                    }
                }
            }
            TagEnd::BlockQuote(_) => {
                self.flush_block_text();
                self.containers.pop();
            }
            TagEnd::CodeBlock => self.finish_code(),
            TagEnd::HtmlBlock => {
                if let Some(html) = self.html.take() {
                    let html = html.trim_end();
                    self.block_text.push_str(html);
                    self.flush_block_text();
                    if !html.is_empty() {
                        self.emit(&escape(html));
                    }
                }
            }
            TagEnd::List(_) => {
                self.flush_block_text();
                self.lists.pop();
            }
            TagEnd::Item => {
                self.flush_block_text();
                self.containers.pop();
            }
            TagEnd::Table => {
                self.flush_block_text();
                if let Some(table) = self.table.take() {
                    let rendered = render_table(&table);
                    self.emit_code_block(&rendered);
                }
            }
            TagEnd::TableHead | TagEnd::TableRow => {
                if let Some(table) = self.table.as_mut() {
                    let row = std::mem::take(&mut table.row);
                    table.rows.push(row);
                }
            }
            TagEnd::TableCell => {
                if let Some(frame) = self.frames.pop() {
                    if let Some(table) = self.table.as_mut() {
                        table.row.push(frame.buf.trim().to_string());
                    }
                }
            }
            TagEnd::Emphasis => self.marker("_"),
            TagEnd::Strong => {
                if !self.in_heading() {
                    self.marker("*");
                }
            }
            TagEnd::Strikethrough => self.marker("~"),
            TagEnd::Link => self.finish_link(),
            TagEnd::Image => self.finish_image(),
            TagEnd::Superscript | TagEnd::Subscript => {}
        }
    }

    fn text(&mut self, text: &str) {
        if let Some(code) = self.code.as_mut() {
            code.content.push_str(text);
            return;
        }
        if let Some(html) = self.html.as_mut() {
            html.push_str(text);
            return;
        }
        self.block_text.push_str(text);
        if let Some(frame) = self.frames.last_mut() {
            frame.raw.push_str(text);
        }
        if self.in_cell() {
            self.emit(text);
        } else {
            self.emit(&escape(text));
        }
    }

    fn inline_code(&mut self, code: &str) {
        self.block_text.push(' ');
        self.block_text.push_str(code);
        self.block_text.push(' ');
        if let Some(frame) = self.frames.last_mut() {
            frame.raw.push_str(code);
        }
        if self.in_cell() {
            self.emit(code);
        } else {
            self.emit(&format!("`{}`", escape(code)));
        }
    }

    fn line_break(&mut self) {
        if let Some(code) = self.code.as_mut() {
            code.content.push('\n');
            return;
        }
        self.block_text.push(' ');
        match self.frames.last_mut() {
            Some(frame) => {
                frame.raw.push(' ');
                self.emit(" ");
            }
            None => self.emit("\n"),
        }
    }

    fn marker(&mut self, marker: &str) {
        if !self.in_cell() {
            self.emit(marker);
        }
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

    fn in_link(&self) -> bool {
        self.frames
            .iter()
            .any(|f| matches!(f.kind, FrameKind::Link { .. }))
    }

    fn finish_link(&mut self) {
        let Some(frame) = self.frames.pop() else {
            return;
        };
        let FrameKind::Link { url, link_type } = frame.kind else {
            return;
        };
        let label = frame.buf.trim();
        if self.in_cell() {
            self.emit(label);
            return;
        }
        let target = if link_type == LinkType::Email && !url.starts_with("mailto:") {
            format!("mailto:{url}")
        } else {
            url
        };
        let rendered = if has_scheme(&target) {
            let target = sanitize_url(&target);
            if label.is_empty() || frame.raw.trim() == target {
                format!("<{target}>")
            } else {
                format!("<{target}|{label}>")
            }
        } else if label.is_empty() {
            escape(&target)
        } else if frame.raw.trim() == target {
            label.to_string()
        } else {
            format!("{label} ({})", escape(&target))
        };
        self.emit(&rendered);
    }

    fn finish_image(&mut self) {
        let Some(frame) = self.frames.pop() else {
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
        let rendered = if has_scheme(&url) {
            let url = sanitize_url(&url);
            if alt.is_empty() {
                format!("<{url}>")
            } else {
                format!("<{url}|{alt}>")
            }
        } else if alt.is_empty() {
            escape(&url)
        } else {
            alt.to_string()
        };
        self.emit(&rendered);
    }

    fn finish_code(&mut self) {
        let Some(code) = self.code.take() else {
            return;
        };
        if self.extract_snippets && code.content.lines().count() >= SNIPPET_MIN_LINES {
            let (name, filetype) = self.infer_name(&code.lang);
            let index = self.snippet_names.len();
            self.snippet_names.push(name.clone());
            self.writing_placeholder = true;
            self.emit(&format!("_(code uploaded as {MARK}{index}{MARK})_"));
            self.writing_placeholder = false;
            let text = std::mem::take(&mut self.out);
            self.pieces.push(Outgoing::Text(text));
            self.pieces.push(Outgoing::Snippet {
                filename: name,
                filetype,
                content: code.content,
            });
            self.at_line_start = true;
            self.pending = Sep::None;
        } else {
            self.emit_code_block(&escape(&code.content));
        }
        // Prose before this block does not describe the next one.
        self.recent.clear();
    }

    /// Writes a fenced block (already escaped), without list indentation.
    fn emit_code_block(&mut self, body: &str) {
        self.raw_block = true;
        self.write(FENCE, true);
        self.write("\n", true);
        if !body.is_empty() {
            self.write(body, false);
            if !body.ends_with('\n') {
                self.write("\n", false);
            }
        }
        self.write(FENCE, true);
        self.raw_block = false;
    }

    /// Asks for a separator before the next block: a blank line, or a single
    /// line break inside lists.
    fn begin_block(&mut self) {
        let sep = if self.lists.is_empty() {
            Sep::Blank
        } else {
            Sep::Line
        };
        self.pending = self.pending.max(sep);
    }

    fn flush_block_text(&mut self) {
        let text = std::mem::take(&mut self.block_text);
        if !is_blank(&text) {
            self.recent.push(text);
            if self.recent.len() > 2 {
                self.recent.remove(0);
            }
        }
    }

    fn emit(&mut self, text: &str) {
        self.write(text, false);
    }

    fn write(&mut self, text: &str, fence: bool) {
        if text.is_empty() {
            return;
        }
        if let Some(frame) = self.frames.last_mut() {
            push_guarded(&mut frame.buf, text, fence);
            return;
        }
        if self.pending != Sep::None {
            if !self.out.is_empty() {
                self.out.push_str(if self.pending == Sep::Blank {
                    "\n\n"
                } else {
                    "\n"
                });
                self.at_line_start = true;
            }
            self.pending = Sep::None;
        }
        for c in text.chars() {
            if c == '\n' {
                self.out.push('\n');
                self.at_line_start = true;
                continue;
            }
            if self.at_line_start {
                self.write_line_prefix();
                self.at_line_start = false;
            }
            if !c.is_whitespace() && !self.writing_placeholder {
                self.has_text = true;
            }
            let mut buf = [0u8; 4];
            push_guarded(&mut self.out, c.encode_utf8(&mut buf), fence);
        }
    }

    fn write_line_prefix(&mut self) {
        let mut prefix = String::new();
        for container in &mut self.containers {
            match container {
                Container::Quote => prefix.push_str("> "),
                Container::Item { marker, started } => {
                    if !*started {
                        prefix.push_str(marker);
                        *started = true;
                    } else if !self.raw_block {
                        prefix.push_str("    ");
                    }
                }
            }
        }
        self.out.push_str(&prefix);
    }

    /// File name and Slack file type for a snippet: a file mentioned just
    /// before the block (same or previous paragraph, or the last heading)
    /// whose type agrees with the fence, else `snippet.<ext>`.
    fn infer_name(&self, lang_tag: &str) -> (String, String) {
        let lang = lookup_lang(lang_tag);
        let fence_type = lang.map(|l| l.filetype).filter(|t| *t != "text");
        let sources = self.recent.iter().rev().chain(self.last_heading.iter());
        for text in sources {
            for name in mentioned_files(text).into_iter().rev() {
                let name_type = filetype_for_name(&name);
                let agrees = match (fence_type, name_type) {
                    (Some(fence), Some(named)) => fence == named,
                    _ => true,
                };
                if agrees {
                    let filetype = fence_type.or(name_type).unwrap_or("text");
                    return (name, filetype.to_string());
                }
            }
        }
        match lang {
            Some(lang) => (lang.default_name(), lang.filetype.to_string()),
            None => ("snippet.txt".to_string(), "text".to_string()),
        }
    }

    fn finish(mut self) -> Converted {
        if !self.out.is_empty() {
            let text = std::mem::take(&mut self.out);
            self.pieces.push(Outgoing::Text(text));
        }
        let names = number_duplicates(&self.snippet_names);
        let mut snippet = 0;
        for piece in &mut self.pieces {
            match piece {
                Outgoing::Text(text) => {
                    if text.contains(MARK) {
                        for (index, name) in names.iter().enumerate() {
                            *text = text.replace(&format!("{MARK}{index}{MARK}"), &escape(name));
                        }
                    }
                }
                Outgoing::Snippet { filename, .. } => {
                    if let Some(name) = names.get(snippet) {
                        filename.clone_from(name);
                    }
                    snippet += 1;
                }
            }
        }
        Converted {
            pieces: self.pieces,
            has_text: self.has_text,
        }
    }
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

/// Renders a table as aligned plain-text columns (escaped, unfenced).
fn render_table(table: &Table) -> String {
    let columns = table
        .rows
        .iter()
        .map(Vec::len)
        .max()
        .unwrap_or(0)
        .max(table.aligns.len());
    let mut widths = vec![1; columns];
    for row in &table.rows {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.chars().count());
        }
    }
    let mut lines = Vec::new();
    for (index, row) in table.rows.iter().enumerate() {
        let cells: Vec<String> = widths
            .iter()
            .enumerate()
            .map(|(col, &width)| {
                let cell = row.get(col).map_or("", String::as_str);
                let align = table.aligns.get(col).copied().unwrap_or(Alignment::None);
                pad(cell, width, align)
            })
            .collect();
        lines.push(cells.join(" | ").trim_end().to_string());
        if index == 0 {
            let rule: Vec<String> = widths.iter().map(|&w| "-".repeat(w)).collect();
            lines.push(rule.join("-+-"));
        }
    }
    escape(&lines.join("\n"))
}

fn pad(cell: &str, width: usize, align: Alignment) -> String {
    let gap = width.saturating_sub(cell.chars().count());
    let (left, right) = match align {
        Alignment::Right => (gap, 0),
        Alignment::Center => (gap / 2, gap - gap / 2),
        Alignment::None | Alignment::Left => (0, gap),
    };
    format!("{}{cell}{}", " ".repeat(left), " ".repeat(right))
}

// ---------------------------------------------------------------------------
// Snippet names

/// A fence language: its aliases, default file extension and Slack type.
struct Lang {
    aliases: &'static [&'static str],
    ext: &'static str,
    filetype: &'static str,
}

impl Lang {
    fn default_name(&self) -> String {
        if self.ext == "Dockerfile" {
            self.ext.to_string()
        } else {
            format!("snippet.{}", self.ext)
        }
    }
}

/// Fence languages; the aliases double as the file extensions recognised for
/// each type.
const LANGS: &[Lang] = &[
    Lang {
        aliases: &["rust", "rs"],
        ext: "rs",
        filetype: "rust",
    },
    Lang {
        aliases: &["python", "py", "python3", "pyi"],
        ext: "py",
        filetype: "python",
    },
    Lang {
        aliases: &["go", "golang"],
        ext: "go",
        filetype: "go",
    },
    Lang {
        aliases: &["javascript", "js", "jsx", "mjs", "cjs", "node"],
        ext: "js",
        filetype: "javascript",
    },
    Lang {
        aliases: &["typescript", "ts", "tsx", "mts", "cts"],
        ext: "ts",
        filetype: "typescript",
    },
    Lang {
        aliases: &["bash", "sh", "shell", "zsh", "console", "shell-session"],
        ext: "sh",
        filetype: "shell",
    },
    Lang {
        aliases: &["json", "jsonc", "json5"],
        ext: "json",
        filetype: "json",
    },
    Lang {
        aliases: &["yaml", "yml"],
        ext: "yaml",
        filetype: "yaml",
    },
    Lang {
        aliases: &["toml"],
        ext: "toml",
        filetype: "toml",
    },
    Lang {
        aliases: &["sql", "postgresql", "postgres", "psql", "mysql", "sqlite"],
        ext: "sql",
        filetype: "sql",
    },
    Lang {
        aliases: &["html", "htm", "xhtml"],
        ext: "html",
        filetype: "html",
    },
    Lang {
        aliases: &["css"],
        ext: "css",
        filetype: "css",
    },
    Lang {
        aliases: &["java"],
        ext: "java",
        filetype: "java",
    },
    Lang {
        aliases: &["c", "h"],
        ext: "c",
        filetype: "c",
    },
    Lang {
        aliases: &["cpp", "c++", "cxx", "cc", "hpp", "hh", "hxx"],
        ext: "cpp",
        filetype: "cpp",
    },
    Lang {
        aliases: &["ruby", "rb"],
        ext: "rb",
        filetype: "ruby",
    },
    Lang {
        aliases: &["swift"],
        ext: "swift",
        filetype: "swift",
    },
    Lang {
        aliases: &["kotlin", "kt", "kts"],
        ext: "kt",
        filetype: "kotlin",
    },
    Lang {
        aliases: &["markdown", "md"],
        ext: "md",
        filetype: "markdown",
    },
    Lang {
        aliases: &["dockerfile", "docker", "containerfile"],
        ext: "Dockerfile",
        filetype: "dockerfile",
    },
    Lang {
        aliases: &["text", "txt", "plain", "plaintext"],
        ext: "txt",
        filetype: "text",
    },
];

/// Further extensions accepted for a bare file name (one without a
/// directory), besides the [`LANGS`] aliases.
const OTHER_EXTS: &str = "\
    xml ini cfg conf env lock proto graphql gql vue svelte scss sass less lua php cs fs ex \
    exs erl hrl hs ml mli scala clj pl pm mod sum gradle tf tfvars ps1 bat cmd mk cmake nix \
    dart zig vim el csv tsv sol patch diff log plist properties service rst tex jl r sbt \
    dockerignore gitignore";

/// File names without an extension that are still clearly files.
const BARE_FILE_NAMES: &[&str] = &[
    "Makefile",
    "Dockerfile",
    "Containerfile",
    "Justfile",
    "Rakefile",
    "Gemfile",
    "Procfile",
    "Vagrantfile",
    "Jenkinsfile",
    "CODEOWNERS",
    ".gitignore",
    ".dockerignore",
    ".editorconfig",
    ".env",
];

/// Tokens that look like file names but are product names.
const NOT_FILES: &str = "\
    node.js vue.js next.js nuxt.js react.js express.js d3.js three.js chart.js ember.js \
    deno.js";

fn lookup_lang(tag: &str) -> Option<&'static Lang> {
    let tag = tag.to_ascii_lowercase();
    LANGS.iter().find(|l| l.aliases.contains(&tag.as_str()))
}

/// Slack file type implied by a file name, `None` when unknown.
fn filetype_for_name(name: &str) -> Option<&'static str> {
    let lower = name.to_ascii_lowercase();
    if lower == "dockerfile" || lower == "containerfile" || lower.starts_with("dockerfile.") {
        return Some("dockerfile");
    }
    let (stem, ext) = lower.rsplit_once('.')?;
    if stem.is_empty() {
        return None;
    }
    lookup_lang(ext).map(|l| l.filetype)
}

/// File names (last path component) of path-like tokens in `text`, in order.
fn mentioned_files(text: &str) -> Vec<String> {
    text.split(|c: char| c.is_whitespace() || "`\"'()[]{}<>,;*|".contains(c))
        .filter_map(file_name_of)
        .collect()
}

fn file_name_of(token: &str) -> Option<String> {
    if token.contains("://") {
        return None;
    }
    // `src/main.rs:42:7` → `src/main.rs`; drop sentence punctuation.
    let token = token.split(':').next()?.trim_end_matches(['.', '!', '?']);
    let has_dir = token.contains('/') || token.contains('\\');
    let base = token.rsplit(['/', '\\']).next()?;
    if base.is_empty() || base.len() > 100 {
        return None;
    }
    if !base
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-' | '+' | '@'))
    {
        return None;
    }
    if BARE_FILE_NAMES.contains(&base) {
        return Some(base.to_string());
    }
    if NOT_FILES
        .split_whitespace()
        .any(|n| n.eq_ignore_ascii_case(base))
    {
        return None;
    }
    let (stem, ext) = base.rsplit_once('.')?;
    let ext_ok = (1..=10).contains(&ext.len())
        && ext.starts_with(|c: char| c.is_ascii_alphabetic())
        && ext.chars().all(|c| c.is_ascii_alphanumeric());
    if !ext_ok || !stem.chars().any(|c| c.is_ascii_alphanumeric()) {
        return None;
    }
    let lower = ext.to_ascii_lowercase();
    let known = lookup_lang(&lower).is_some() || OTHER_EXTS.split_whitespace().any(|e| e == lower);
    (has_dir || known).then(|| base.to_string())
}

/// Numbers names that occur more than once: `a.rs`, `a.rs` → `a-1.rs`, `a-2.rs`.
fn number_duplicates(names: &[String]) -> Vec<String> {
    let mut counts: HashMap<&str, usize> = HashMap::new();
    for name in names {
        *counts.entry(name.as_str()).or_default() += 1;
    }
    let mut seen: HashMap<&str, usize> = HashMap::new();
    names
        .iter()
        .map(|name| {
            if counts.get(name.as_str()).copied().unwrap_or(0) < 2 {
                return name.clone();
            }
            let n = seen.entry(name.as_str()).or_default();
            *n += 1;
            match name.rsplit_once('.') {
                Some((stem, ext)) if !stem.is_empty() => format!("{stem}-{n}.{ext}"),
                _ => format!("{name}-{n}"),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn code_block(lang: &str, lines: usize) -> String {
        let body: String = (1..=lines).map(|i| format!("line {i}\n")).collect();
        format!("```{lang}\n{body}```\n")
    }

    fn snippets(out: &[Outgoing]) -> Vec<(String, String)> {
        out.iter()
            .filter_map(|o| match o {
                Outgoing::Snippet {
                    filename, filetype, ..
                } => Some((filename.clone(), filetype.clone())),
                Outgoing::Text(_) => None,
            })
            .collect()
    }

    fn texts(out: &[Outgoing]) -> Vec<String> {
        out.iter()
            .filter_map(|o| match o {
                Outgoing::Text(t) => Some(t.clone()),
                Outgoing::Snippet { .. } => None,
            })
            .collect()
    }

    // ----- conversion -----

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

    #[test]
    fn headings_any_level() {
        assert_eq!(
            markdown_to_mrkdwn("# Title\n\nBody.\n\n### Sub **x**\nmore"),
            "*Title*\n\nBody.\n\n*Sub x*\n\nmore"
        );
    }

    #[test]
    fn nested_unordered_list() {
        assert_eq!(
            markdown_to_mrkdwn("- a\n  - b\n    - c\n- d"),
            "• a\n    • b\n        • c\n• d"
        );
    }

    #[test]
    fn ordered_list_keeps_numbers() {
        assert_eq!(
            markdown_to_mrkdwn("Steps:\n\n3. x\n4. y\n   - sub\n5. z"),
            "Steps:\n\n3. x\n4. y\n    • sub\n5. z"
        );
    }

    #[test]
    fn loose_list_items_are_compact() {
        assert_eq!(
            markdown_to_mrkdwn("- a\n\n  more a\n\n- b"),
            "• a\n    more a\n• b"
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
    fn escaping_plain_text() {
        assert_eq!(
            markdown_to_mrkdwn("Tom & Jerry: 1 < 2 > 0, <!channel>"),
            "Tom &amp; Jerry: 1 &lt; 2 &gt; 0, &lt;!channel&gt;"
        );
        assert_eq!(markdown_to_mrkdwn("a &amp; b"), "a &amp; b");
    }

    #[test]
    fn code_block_verbatim_without_language() {
        let md = "Here:\n\n```rust\nfn main() {\n    let x = 1 < 2;\n\n    println!(\"&\");\n}\n```\n\nDone.";
        assert_eq!(
            markdown_to_mrkdwn(md),
            "Here:\n\n```\nfn main() {\n    let x = 1 &lt; 2;\n\n    println!(\"&amp;\");\n}\n```\n\nDone."
        );
    }

    #[test]
    fn code_block_in_list_is_not_indented() {
        assert_eq!(
            markdown_to_mrkdwn("- step:\n\n  ```sh\n  make\n  ```\n- next"),
            "• step:\n```\nmake\n```\n• next"
        );
    }

    #[test]
    fn triple_backticks_in_code_are_defused() {
        let out = markdown_to_mrkdwn("````md\n```rust\nx\n```\n````");
        assert_eq!(out.matches("```").count(), 2, "{out:?}");
        assert!(out.contains(&format!("``{ZWSP}`rust")), "{out:?}");
    }

    #[test]
    fn blockquote_paragraphs_and_rule() {
        assert_eq!(
            markdown_to_mrkdwn("> quoted\n> more\n\n---\n\nafter"),
            "> quoted\n> more\n\n———\n\nafter"
        );
        assert_eq!(
            markdown_to_mrkdwn("first\n\nsecond\nline"),
            "first\n\nsecond\nline"
        );
    }

    #[test]
    fn tables_become_aligned_code() {
        let md = "| Name | Qty |\n|:-----|----:|\n| apple | 3 |\n| kiwi & co | 12 |\n";
        assert_eq!(
            markdown_to_mrkdwn(md),
            "```\nName      | Qty\n----------+----\napple     |   3\nkiwi &amp; co |  12\n```"
        );
    }

    // ----- splitting -----

    #[test]
    fn split_short_text_is_one_chunk() {
        assert_eq!(split_message("\n\nhello\n\n", 100), vec!["hello"]);
        assert!(split_message(" \n\n", 100).is_empty());
    }

    #[test]
    fn split_prefers_paragraph_boundaries() {
        let l = |c: char| c.to_string().repeat(10);
        let text = format!("{}\n{}\n\n{}\n{}", l('a'), l('b'), l('c'), l('d'));
        // Everything up to the `c` line (33 chars) fits in 40, but the cut
        // goes at the blank line instead.
        assert_eq!(
            split_message(&text, 40),
            vec![
                format!("{}\n{}", l('a'), l('b')),
                format!("{}\n{}", l('c'), l('d'))
            ]
        );
    }

    #[test]
    fn split_falls_back_to_lines() {
        let text = (0..10)
            .map(|i| format!("line number {i}"))
            .collect::<Vec<_>>()
            .join("\n");
        let chunks = split_message(&text, 50);
        assert!(chunks.len() > 1);
        for chunk in &chunks {
            assert!(chunk.chars().count() <= 50);
            assert!(chunk.starts_with("line number "), "{chunk:?}");
        }
        assert_eq!(chunks.join("\n"), text);
    }

    #[test]
    fn split_keeps_code_block_whole_when_it_fits() {
        let code = format!("```\n{}```", "x = 1\n".repeat(5));
        let text = format!("intro text here\n{code}\noutro");
        let chunks = split_message(&text, code.chars().count() + 2);
        assert!(chunks.iter().any(|c| c == &code), "{chunks:?}");
    }

    #[test]
    fn split_long_code_block_reopens_fences() {
        let body: Vec<String> = (0..30).map(|i| format!("let v{i} = {i};")).collect();
        let text = format!("```\n{}\n```", body.join("\n"));
        let chunks = split_message(&text, 100);
        assert!(chunks.len() > 2);
        for chunk in &chunks {
            assert!(chunk.starts_with("```\n"), "{chunk:?}");
            assert!(chunk.ends_with("\n```"), "{chunk:?}");
            assert!(chunk.chars().count() <= 100);
        }
        let rejoined: Vec<String> = chunks
            .iter()
            .flat_map(|c| c.lines().filter(|l| *l != "```").map(str::to_string))
            .collect();
        assert_eq!(rejoined, body);
    }

    #[test]
    fn split_quoted_code_block_reopens_with_quote() {
        let text = format!("> ```\n{}> ```", "> some code line\n".repeat(10));
        for chunk in split_message(&text, 60) {
            assert!(chunk.starts_with("> ```"), "{chunk:?}");
            assert!(chunk.ends_with("> ```"), "{chunk:?}");
        }
    }

    #[test]
    fn split_hard_splits_long_line_by_chars() {
        let text = "é".repeat(100);
        let chunks = split_message(&text, 40);
        assert!(chunks.len() >= 3);
        assert!(chunks.iter().all(|c| c.chars().count() <= 40));
        assert_eq!(chunks.concat(), text);
    }

    #[test]
    fn split_long_prose_line_cuts_after_space() {
        let text = "word ".repeat(40).trim_end().to_string();
        let chunks = split_message(&text, 50);
        for chunk in &chunks {
            assert!(chunk.chars().count() <= 50);
            assert!(
                !chunk.starts_with(' ') && !chunk.ends_with(' '),
                "{chunk:?}"
            );
            assert!(chunk.split(' ').all(|w| w == "word"), "{chunk:?}");
        }
    }

    /// Small deterministic PRNG for the property test.
    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }
        fn below(&mut self, n: u64) -> usize {
            (self.next() % n) as usize
        }
    }

    fn random_doc(rng: &mut Rng) -> String {
        let words = ["alpha", "β", "gamma", "&amp;", "`x`", "*b*", "ünï", "delta"];
        let mut blocks = Vec::new();
        for _ in 0..rng.below(12) + 1 {
            let block = match rng.below(6) {
                0 | 1 => {
                    let lines: Vec<String> = (0..rng.below(5) + 1)
                        .map(|_| {
                            let n = rng.below(30) + 1;
                            (0..n)
                                .map(|_| words[rng.below(words.len() as u64)])
                                .collect::<Vec<_>>()
                                .join(" ")
                        })
                        .collect();
                    lines.join("\n")
                }
                2 => "z".repeat(rng.below(400) + 1),
                3 => {
                    let lines: Vec<String> = (0..rng.below(40))
                        .map(|i| match rng.below(5) {
                            0 => String::new(),
                            1 => "c".repeat(rng.below(300)),
                            _ => format!("    code({i}) <> &"),
                        })
                        .collect();
                    let mut block = String::from("```rust\n");
                    for line in lines {
                        block.push_str(&line);
                        block.push('\n');
                    }
                    block.push_str("```");
                    block
                }
                4 => {
                    let lines: Vec<String> = (0..rng.below(15) + 1)
                        .map(|i| format!("> quoted code {i}"))
                        .collect();
                    format!("> ```\n{}\n> ```", lines.join("\n"))
                }
                _ => (0..rng.below(10) + 1)
                    .map(|i| format!("• item {i}"))
                    .collect::<Vec<_>>()
                    .join("\n"),
            };
            blocks.push(block);
        }
        let sep = if rng.below(3) == 0 { "\n" } else { "\n\n" };
        blocks.join(sep)
    }

    fn essence(text: &str) -> String {
        text.chars()
            .filter(|c| !c.is_whitespace() && *c != '`' && *c != '>')
            .collect()
    }

    #[test]
    fn split_property_chunks_fit_and_fences_balance() {
        let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
        for round in 0..600 {
            let doc = random_doc(&mut rng);
            let max = 32 + rng.below(300);
            let chunks = split_message(&doc, max);
            for chunk in &chunks {
                assert!(
                    chunk.chars().count() <= max,
                    "round {round}: chunk of {} > {max}: {chunk:?}",
                    chunk.chars().count()
                );
                assert!(!chunk.trim().is_empty(), "round {round}: empty chunk");
                assert_eq!(
                    chunk.matches("```").count() % 2,
                    0,
                    "round {round}: unbalanced fences in {chunk:?}"
                );
                let first = chunk.lines().next().unwrap_or_default();
                let last = chunk.lines().last().unwrap_or_default();
                assert!(!is_blank(first) && !is_blank(last), "round {round}");
            }
            assert_eq!(
                essence(&chunks.concat()),
                essence(&doc),
                "round {round}: content changed"
            );
        }
    }

    #[test]
    fn split_property_on_converted_markdown() {
        let mut rng = Rng(42);
        for round in 0..200 {
            let mut md = String::new();
            for _ in 0..rng.below(8) + 1 {
                match rng.below(3) {
                    0 => md.push_str(&code_block("python", rng.below(60))),
                    1 => md.push_str(&"Some *prose* & <stuff>. ".repeat(rng.below(30) + 1)),
                    _ => md.push_str("- a\n- b\n  - c\n"),
                }
                md.push('\n');
            }
            let max = 40 + rng.below(400);
            for chunk in split_message(&markdown_to_mrkdwn(&md), max) {
                assert!(chunk.chars().count() <= max, "round {round}");
                assert_eq!(chunk.matches("```").count() % 2, 0, "round {round}");
            }
        }
    }

    // ----- snippets -----

    #[test]
    fn nineteen_lines_stay_inline() {
        let md = format!("Code:\n\n{}", code_block("rust", SNIPPET_MIN_LINES - 1));
        let out = render_reply(&md, "");
        assert_eq!(out.len(), 1);
        assert!(snippets(&out).is_empty());
        assert!(texts(&out)[0].contains("line 19\n```"));
    }

    #[test]
    fn twenty_lines_become_snippet_in_document_order() {
        let md = format!(
            "Before.\n\n{}\nAfter.",
            code_block("rust", SNIPPET_MIN_LINES)
        );
        let out = render_reply(&md, "");
        let content: String = (1..=20).map(|i| format!("line {i}\n")).collect();
        assert_eq!(
            out,
            vec![
                Outgoing::Text("Before.\n\n_(code uploaded as snippet.rs)_".to_string()),
                Outgoing::Snippet {
                    filename: "snippet.rs".to_string(),
                    filetype: "rust".to_string(),
                    content,
                },
                Outgoing::Text("After.".to_string()),
            ]
        );
    }

    #[test]
    fn snippet_content_is_not_escaped() {
        let md = format!("```\n{}```\n", "a < b && c > d\n".repeat(20));
        let out = render_reply(&md, "");
        let content = out.iter().find_map(|o| match o {
            Outgoing::Snippet { content, .. } => Some(content.clone()),
            Outgoing::Text(_) => None,
        });
        assert_eq!(content, Some("a < b && c > d\n".repeat(20)));
    }

    #[test]
    fn filename_from_mentioned_path() {
        let md = format!(
            "Replace `src/auth/session.rs` with:\n\n{}",
            code_block("rust", 25)
        );
        let out = render_reply(&md, "");
        assert_eq!(
            snippets(&out),
            vec![("session.rs".to_string(), "rust".to_string())]
        );
        assert!(texts(&out)[0].ends_with("_(code uploaded as session.rs)_"));
    }

    #[test]
    fn filename_from_previous_paragraph_or_heading() {
        let md = format!(
            "The handler lives in handler.go.\n\nHere is the new version:\n\n{}",
            code_block("go", 20)
        );
        assert_eq!(
            snippets(&render_reply(&md, "")),
            vec![("handler.go".to_string(), "go".to_string())]
        );
        let md = format!("## Makefile\n\nUpdated:\n\n{}", code_block("", 20));
        assert_eq!(
            snippets(&render_reply(&md, "")),
            vec![("Makefile".to_string(), "text".to_string())]
        );
    }

    #[test]
    fn filename_ignores_mentions_of_another_language() {
        let md = format!(
            "After editing `Cargo.toml`, run:\n\n{}",
            code_block("bash", 20)
        );
        assert_eq!(
            snippets(&render_reply(&md, "")),
            vec![("snippet.sh".to_string(), "shell".to_string())]
        );
    }

    #[test]
    fn filename_from_language() {
        let cases = [
            ("python", "snippet.py", "python"),
            ("js", "snippet.js", "javascript"),
            ("TypeScript", "snippet.ts", "typescript"),
            ("shell", "snippet.sh", "shell"),
            ("yml", "snippet.yaml", "yaml"),
            ("c++", "snippet.cpp", "cpp"),
            ("kotlin", "snippet.kt", "kotlin"),
            ("dockerfile", "Dockerfile", "dockerfile"),
            ("brainfuck", "snippet.txt", "text"),
            ("", "snippet.txt", "text"),
        ];
        for (lang, name, filetype) in cases {
            let md = format!("Here you go.\n\n{}", code_block(lang, 20));
            assert_eq!(
                snippets(&render_reply(&md, "")),
                vec![(name.to_string(), filetype.to_string())],
                "language {lang:?}"
            );
        }
    }

    #[test]
    fn duplicate_names_are_numbered() {
        let md = format!(
            "First:\n\n{}\nSecond:\n\n{}\nOther:\n\n{}",
            code_block("rust", 20),
            code_block("rust", 21),
            code_block("python", 20)
        );
        let out = render_reply(&md, "");
        assert_eq!(
            snippets(&out),
            vec![
                ("snippet-1.rs".to_string(), "rust".to_string()),
                ("snippet-2.rs".to_string(), "rust".to_string()),
                ("snippet.py".to_string(), "python".to_string()),
            ]
        );
        let all = texts(&out).join("\n");
        assert!(all.contains("_(code uploaded as snippet-1.rs)_"), "{all}");
        assert!(all.contains("_(code uploaded as snippet-2.rs)_"), "{all}");
        assert!(!all.contains(MARK));
    }

    #[test]
    fn markdown_to_mrkdwn_never_extracts() {
        let out = markdown_to_mrkdwn(&code_block("rust", 30));
        assert!(out.starts_with("```\nline 1\n"));
        assert!(out.ends_with("line 30\n```"));
    }

    // ----- render_reply -----

    #[test]
    fn prefix_goes_on_first_text_only() {
        let para = "word ".repeat(700);
        let md = format!("{para}\n\n{para}\n\n{para}");
        let out = render_reply(&md, "*PM:* ");
        assert!(out.len() >= 2);
        let texts = texts(&out);
        assert!(texts[0].starts_with("*PM:* word"));
        assert!(texts[1..].iter().all(|t| !t.contains("*PM:*")));
        assert!(texts.iter().all(|t| t.chars().count() <= MAX_MESSAGE_CHARS));
    }

    #[test]
    fn prefix_before_block_syntax_gets_own_line() {
        assert_eq!(
            render_reply("- a\n- b", "*PM:* "),
            vec![Outgoing::Text("*PM:*\n• a\n• b".to_string())]
        );
        assert_eq!(
            render_reply("Hi **there**", "*PM:* "),
            vec![Outgoing::Text("*PM:* Hi *there*".to_string())]
        );
    }

    #[test]
    fn only_a_snippet_gets_a_lead_text() {
        let out = render_reply(&code_block("rust", 20), "*PM:* ");
        assert_eq!(out.len(), 2);
        assert_eq!(
            out[0],
            Outgoing::Text("*PM:* _(see the snippet below)_".to_string())
        );
        assert!(matches!(&out[1], Outgoing::Snippet { filename, .. } if filename == "snippet.rs"));
    }

    #[test]
    fn empty_answer() {
        let expected = vec![Outgoing::Text("*PM:* _(no answer)_".to_string())];
        assert_eq!(render_reply("", "*PM:* "), expected);
        assert_eq!(render_reply("  \n\t\n", "*PM:* "), expected);
    }
}
