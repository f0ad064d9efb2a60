//! The mrkdwn text being written, with the line structure Markdown's nested
//! blocks turn into.
//!
//! Markdown nests blocks; mrkdwn is flat lines. [`Output`] therefore owes a
//! separator before the next block (a blank line, or a single line break
//! inside lists, which Slack would otherwise spread out), and starts every
//! line with the prefixes of the open [`Container`]s: `> ` per block quote,
//! and per list item its marker on its first line, then a 4-space indent.
//! Code blocks and tables get no indent, so their fences start the line.

use super::escape::push_guarded;

/// Separator owed before the next block's first character.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum Sep {
    None,
    Line,
    Blank,
}

/// A block that prefixes each of its lines.
pub(super) enum Container {
    Quote,
    Item { marker: String, started: bool },
}

/// What is being written, which decides how it is guarded and counted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Ink {
    /// Text of the answer: runs of backticks are defused.
    Text,
    /// A fence of ours: written as is.
    Fence,
    /// A snippet placeholder: does not count as text of the answer.
    Placeholder,
}

/// The text of the current message run, and where its next line starts.
pub(super) struct Output {
    text: String,
    at_line_start: bool,
    pending: Sep,
    containers: Vec<Container>,
    /// Writing a code block or table: no list indentation.
    raw_block: bool,
    /// Whether any text other than snippet placeholders was written.
    has_text: bool,
}

impl Output {
    /// Nothing written yet.
    pub(super) fn new() -> Self {
        Self {
            text: String::new(),
            at_line_start: true,
            pending: Sep::None,
            containers: Vec::new(),
            raw_block: false,
            has_text: false,
        }
    }

    /// Asks for (at least) `sep` before the next character written.
    pub(super) fn request(&mut self, sep: Sep) {
        self.pending = self.pending.max(sep);
    }

    /// Opens a container: its prefix goes before every following line.
    pub(super) fn push_container(&mut self, container: Container) {
        self.containers.push(container);
    }

    /// Closes the innermost container.
    pub(super) fn pop_container(&mut self) {
        self.containers.pop();
    }

    /// Switches list indentation off (inside code blocks and tables) or on.
    pub(super) fn set_raw_block(&mut self, raw: bool) {
        self.raw_block = raw;
    }

    /// Whether any text other than snippet placeholders was written.
    pub(super) fn has_text(&self) -> bool {
        self.has_text
    }

    /// Takes the text written so far; the next text starts a new run, at the
    /// start of a line and without a separator.
    pub(super) fn take_text(&mut self) -> String {
        self.at_line_start = true;
        self.pending = Sep::None;
        std::mem::take(&mut self.text)
    }

    /// The text written since the last [`Output::take_text`].
    pub(super) fn into_text(self) -> String {
        self.text
    }

    /// Writes `text`, after the separator owed and with each line's prefix.
    pub(super) fn write(&mut self, text: &str, ink: Ink) {
        if text.is_empty() {
            return;
        }
        self.separate();
        for c in text.chars() {
            if c == '\n' {
                self.text.push('\n');
                self.at_line_start = true;
                continue;
            }
            if self.at_line_start {
                self.write_line_prefix();
                self.at_line_start = false;
            }
            if !c.is_whitespace() && ink != Ink::Placeholder {
                self.has_text = true;
            }
            let mut buf = [0u8; 4];
            push_guarded(&mut self.text, c.encode_utf8(&mut buf), ink == Ink::Fence);
        }
    }

    /// Writes the separator owed, unless nothing precedes it.
    fn separate(&mut self) {
        if self.pending != Sep::None {
            if !self.text.is_empty() {
                self.text.push_str(if self.pending == Sep::Blank {
                    "\n\n"
                } else {
                    "\n"
                });
                self.at_line_start = true;
            }
            self.pending = Sep::None;
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
        self.text.push_str(&prefix);
    }
}

#[cfg(test)]
mod tests {
    use crate::slack::format::markdown_to_mrkdwn;

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
    fn code_block_in_list_is_not_indented() {
        assert_eq!(
            markdown_to_mrkdwn("- step:\n\n  ```sh\n  make\n  ```\n- next"),
            "• step:\n```\nmake\n```\n• next"
        );
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
}
