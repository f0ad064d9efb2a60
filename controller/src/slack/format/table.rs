//! Tables as a code block of aligned columns, since Slack has no table
//! syntax and a monospaced block is the only way to keep columns readable.
//!
//! The renderer feeds cells in as plain (unescaped) text; [`Table::render`]
//! pads them to the widest cell of their column, honouring the alignment row,
//! and escapes the result once.

use pulldown_cmark::Alignment;

use super::escape::escape;

/// A table being collected, row by row.
pub(super) struct Table {
    aligns: Vec<Alignment>,
    rows: Vec<Vec<String>>,
    row: Vec<String>,
}

impl Table {
    /// An empty table whose columns are aligned as `aligns`.
    pub(super) fn new(aligns: Vec<Alignment>) -> Self {
        Self {
            aligns,
            rows: Vec::new(),
            row: Vec::new(),
        }
    }

    /// Starts a row (the head counts as one).
    pub(super) fn start_row(&mut self) {
        self.row.clear();
    }

    /// Adds a cell's text to the current row.
    pub(super) fn push_cell(&mut self, cell: String) {
        self.row.push(cell);
    }

    /// Ends the current row.
    pub(super) fn end_row(&mut self) {
        let row = std::mem::take(&mut self.row);
        self.rows.push(row);
    }

    /// Renders the table as aligned plain-text columns (escaped, unfenced).
    pub(super) fn render(&self) -> String {
        let widths = self.widths();
        let mut lines = Vec::new();
        for (index, row) in self.rows.iter().enumerate() {
            let cells: Vec<String> = widths
                .iter()
                .enumerate()
                .map(|(col, &width)| {
                    let cell = row.get(col).map_or("", String::as_str);
                    let align = self.aligns.get(col).copied().unwrap_or(Alignment::None);
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

    /// Width of each column: its widest cell, at least 1.
    fn widths(&self) -> Vec<usize> {
        let columns = self
            .rows
            .iter()
            .map(Vec::len)
            .max()
            .unwrap_or(0)
            .max(self.aligns.len());
        let mut widths = vec![1; columns];
        for row in &self.rows {
            for (width, cell) in widths.iter_mut().zip(row) {
                *width = (*width).max(cell.chars().count());
            }
        }
        widths
    }
}

/// `cell` padded with spaces to `width` characters, placed as `align` says.
fn pad(cell: &str, width: usize, align: Alignment) -> String {
    let gap = width.saturating_sub(cell.chars().count());
    let (left, right) = match align {
        Alignment::Right => (gap, 0),
        Alignment::Center => (gap / 2, gap - gap / 2),
        Alignment::None | Alignment::Left => (0, gap),
    };
    format!("{}{cell}{}", " ".repeat(left), " ".repeat(right))
}

#[cfg(test)]
mod tests {
    use crate::slack::format::markdown_to_mrkdwn;

    #[test]
    fn tables_become_aligned_code() {
        let md = "| Name | Qty |\n|:-----|----:|\n| apple | 3 |\n| kiwi & co | 12 |\n";
        assert_eq!(
            markdown_to_mrkdwn(md),
            "```\nName      | Qty\n----------+----\napple     |   3\nkiwi &amp; co |  12\n```"
        );
    }
}
