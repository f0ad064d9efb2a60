//! The words that answer the Artist's open drawing: "draw it" (or "draw") and "cancel"
//! while its prompt waits; "use it", "use it at <path>", "again" and "cancel" once it is
//! drawn. Whole messages only (a leading `@codebutler.artist` aside, case and a final
//! `.`/`!` ignored), so a sentence that happens to hold the words is still a message for
//! the PM.

use crate::domain::DrawingStage;

/// What a word does to the open drawing.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DrawingWord {
    /// Draw it (again, once drawn).
    Draw,
    /// Commit it, at the path given or the one proposed.
    Use(Option<String>),
    Cancel,
}

/// What `text` says to a drawing at `stage`, if it is one of its words.
pub fn drawing_word(text: &str, stage: DrawingStage) -> Option<DrawingWord> {
    let trimmed = text.trim();
    let lower = trimmed.to_lowercase();
    let rest = lower
        .strip_prefix("@codebutler.artist")
        .map_or(lower.as_str(), str::trim_start);
    let skipped = lower.len() - rest.len();
    let words = rest.trim_end_matches(['.', '!']).trim();
    match stage {
        DrawingStage::Proposed => match words {
            "draw it" | "draw" => Some(DrawingWord::Draw),
            "cancel" | "cancel it" => Some(DrawingWord::Cancel),
            _ => None,
        },
        DrawingStage::Drawn => match words {
            "use it" | "use this" => Some(DrawingWord::Use(None)),
            "again" | "draw it again" | "try again" => Some(DrawingWord::Draw),
            "cancel" | "cancel it" => Some(DrawingWord::Cancel),
            _ => {
                words.strip_prefix("use it at ")?;
                // The path as typed (its case kept), from the original text.
                let start = skipped + "use it at ".len();
                let path = trimmed.get(start..)?.trim().trim_end_matches(['.', '!']);
                Some(DrawingWord::Use(Some(path.trim().to_owned())))
            }
        },
        DrawingStage::Used | DrawingStage::Cancelled => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_answer_the_stage_they_belong_to() {
        use DrawingStage::{Drawn, Proposed};
        assert_eq!(drawing_word("Draw it!", Proposed), Some(DrawingWord::Draw));
        assert_eq!(
            drawing_word("@codebutler.artist draw it", Proposed),
            Some(DrawingWord::Draw)
        );
        assert_eq!(drawing_word("draw it with a hat", Proposed), None);
        assert_eq!(drawing_word("use it", Proposed), None);
        assert_eq!(drawing_word("Use it.", Drawn), Some(DrawingWord::Use(None)));
        assert_eq!(
            drawing_word("use it at Docs/Logo.png", Drawn),
            Some(DrawingWord::Use(Some("Docs/Logo.png".into())))
        );
        assert_eq!(
            drawing_word("@codebutler.artist use it at ../x.png", Drawn),
            Some(DrawingWord::Use(Some("../x.png".into())))
        );
        assert_eq!(drawing_word("again", Drawn), Some(DrawingWord::Draw));
        assert_eq!(drawing_word("cancel", Drawn), Some(DrawingWord::Cancel));
        assert_eq!(drawing_word("draw it", DrawingStage::Used), None);
    }
}
