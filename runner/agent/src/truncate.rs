//! Output caps: tool output is cut before it enters a conversation, with a marker the
//! model can see.

/// Cuts `text` to at most `max_bytes` (on a character boundary) and appends a marker
/// saying how much was left out. Text within the cap is returned unchanged.
pub fn truncate_output(text: &str, max_bytes: usize) -> String {
    if text.len() <= max_bytes {
        return text.to_owned();
    }
    let mut cut = max_bytes;
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    format!(
        "{}\n[output truncated: {} of {} bytes omitted]",
        &text[..cut],
        text.len() - cut,
        text.len()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_text_is_unchanged() {
        assert_eq!(truncate_output("abc", 3), "abc");
    }

    #[test]
    fn long_text_is_cut_with_marker() {
        let out = truncate_output("abcdef", 4);
        assert!(out.starts_with("abcd\n[output truncated: 2 of 6 bytes omitted]"));
    }

    #[test]
    fn cut_respects_char_boundaries() {
        let out = truncate_output("ééé", 3);
        assert!(out.starts_with("é\n"));
    }
}
