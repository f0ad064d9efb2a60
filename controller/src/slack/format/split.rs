//! Splitting mrkdwn under Slack's message size without breaking code blocks.
//!
//! Works on lines of already-rendered mrkdwn, so it knows nothing of Markdown:
//! the only syntax it tracks is the ```` ``` ```` fence (and the `> ` quote
//! prefix before it), because a chunk that ends inside a code block must
//! close it and the next chunk must reopen it, or Slack renders the rest of
//! the thread as code. Among the cuts that fit it prefers the end of the
//! text, then paragraph boundaries, then any line, and cuts inside a line
//! only when one line alone is too long — and then not inside a `<…>` link or
//! reference (in rendered mrkdwn every `<` opens one), unless that one alone
//! is longer than the limit.

use super::{FENCE, is_blank};

/// Smallest limit [`split_message`] works with: a chunk that continues a code
/// block needs room for a reopening and a closing fence plus some content.
const MIN_SPLIT_CHARS: usize = 32;

/// Longest quote prefix (`"> "`, …) that is repeated on reopened fences.
const MAX_FENCE_PREFIX: usize = 8;

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
        let step = match best_end(&lines, i, open.as_deref(), max) {
            Some((end, end_open)) => {
                let step = take_lines(&lines[i..end], open.as_deref(), end_open);
                i = end;
                step
            }
            // Line `i` alone does not fit: cut it (last resort).
            None => cut_long_line(&mut lines[i], open.as_deref(), max),
        };
        chunks.extend(step.chunk);
        open = step.open;
    }
    chunks
}

/// What one cut produced: the chunk (unless blank) and the code-block state
/// where it ended (`Some(quote prefix)` inside a block).
struct Step {
    chunk: Option<String>,
    open: Option<String>,
}

/// The best place to cut a chunk that starts at line `start` (in the
/// code-block state `open`): the index after its last line and the state
/// there, or `None` when not even line `start` fits.
fn best_end(
    lines: &[String],
    start: usize,
    open: Option<&str>,
    max: usize,
) -> Option<(usize, Option<String>)> {
    let mut best: Option<(i8, usize, Option<String>)> = None;
    let mut state = open.map(str::to_string);
    let mut len = reopen_len(open);
    for k in start..lines.len() {
        let line = &lines[k];
        len += line.chars().count() + usize::from(k > start);
        if len > max {
            break;
        }
        let was_in_code = state.is_some();
        state = toggle_fences(state, line);
        let close_len = state.as_deref().map_or(0, |p| fence_chars(p) + 1);
        if len + close_len > max {
            continue;
        }
        let priority = cut_priority(line, lines.get(k + 1), state.is_some(), was_in_code);
        if best.as_ref().is_none_or(|(p, _, _)| priority >= *p) {
            best = Some((priority, k + 1, state.clone()));
        }
    }
    best.map(|(_, end, state)| (end, state))
}

/// How good a cut after `line` is, higher is better: the end of the text,
/// then a paragraph boundary, then any other line outside code, then a line
/// inside code; worst is a cut that would leave an empty block behind.
fn cut_priority(line: &str, next: Option<&String>, in_code: bool, was_in_code: bool) -> i8 {
    match (in_code, next) {
        (_, None) => 3,
        (false, Some(next)) if is_blank(line) || is_blank(next) => 2,
        (false, Some(_)) => 1,
        // Inside a code block: avoid leaving an empty block behind.
        (true, Some(next)) if !was_in_code || fence_count(next) % 2 == 1 => -1,
        (true, Some(_)) => 0,
    }
}

/// The chunk made of whole `lines` (trailing blank lines dropped unless it
/// ends inside code), which ends in the code-block state `end_open`.
fn take_lines(lines: &[String], open: Option<&str>, end_open: Option<String>) -> Step {
    let mut last = lines.len();
    if end_open.is_none() {
        while last > 0 && is_blank(&lines[last - 1]) {
            last -= 1;
        }
    }
    let body = lines[..last].join("\n");
    Step {
        chunk: assemble(reopen(open), &body, end_open.as_deref()),
        open: end_open,
    }
}

/// The chunk made of as much of a too-long `line` as fits; the rest is left
/// in `line` for the next chunk.
fn cut_long_line(line: &mut String, open: Option<&str>, max: usize) -> Step {
    let reserve = MAX_FENCE_PREFIX + FENCE.len() + 1;
    let avail = max.saturating_sub(reopen_len(open) + reserve).max(1);
    let whole = std::mem::take(line);
    let (head, tail) = cut_line(&whole, avail, open.is_none());
    let after = toggle_fences(open.map(str::to_string), head);
    let head = if after.is_none() {
        head.trim_end()
    } else {
        head
    };
    let chunk = assemble(reopen(open), head, after.as_deref());
    *line = tail.to_string();
    Step { chunk, open: after }
}

/// The fence line that reopens a code block at the start of a chunk.
fn reopen(open: Option<&str>) -> Option<String> {
    open.map(|p| format!("{p}{FENCE}\n"))
}

/// Length of [`reopen`]'s line, newline included.
fn reopen_len(open: Option<&str>) -> usize {
    open.map_or(0, |p| fence_chars(p) + 1)
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
/// never all of it). Prose is cut after a space when one is near the limit;
/// a cut inside a `<…>` moves before its `<`, or after its `>` when it starts
/// the line and fits.
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
    if let Some((open, close)) = split_markup(&chars, cut) {
        if open > 0 {
            cut = open;
        } else if close < avail.min(total.saturating_sub(1)) {
            cut = close + 1;
            if prose && is_char(cut, ' ') && cut + 1 < total {
                cut += 1;
            }
        }
    }
    let byte = chars.get(cut).map_or(line.len(), |&(b, _)| b);
    line.split_at(byte)
}

/// The `<` and `>` of the `<…>` that a cut before character `cut` would split, if it would.
fn split_markup(chars: &[(usize, char)], cut: usize) -> Option<(usize, usize)> {
    let open = chars[..cut]
        .iter()
        .rposition(|&(_, c)| c == '<' || c == '>')
        .filter(|&at| chars[at].1 == '<')?;
    let close = cut + chars[cut..].iter().position(|&(_, c)| c == '>')?;
    Some((open, close))
}

/// Number of fences on a line.
fn fence_count(line: &str) -> usize {
    line.matches(FENCE).count()
}

/// Length of a fence line with quote prefix `prefix`, newline excluded.
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::slack::format::markdown_to_mrkdwn;
    use crate::slack::format::test_support::code_block;

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
}
