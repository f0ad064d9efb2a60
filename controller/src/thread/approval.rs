//! Typed approvals of a pending plan: a message that is nothing more than an approval word
//! ("yes", "sí", "dale", "go", "lgtm", "ship it", …), case, punctuation, mentions and
//! approval emoji ignored. "yes but change X" is not an approval: it goes back to the PM.
//! The thread's other whole-message words live here too: "stop", "undo", "rebase", and the
//! words declining a review round.

/// Words and phrases that approve a plan on their own.
const APPROVALS: &[&str] = &[
    "yes",
    "y",
    "yep",
    "yeah",
    "yup",
    "si",
    "sí",
    "dale",
    "go",
    "go ahead",
    "do it",
    "proceed",
    "ok",
    "okay",
    "lgtm",
    "ship it",
    "approve",
    "approved",
    "sounds good",
    "let's go",
    "lets go",
    "+1",
    ":+1:",
    ":thumbsup:",
    ":white_check_mark:",
    "👍",
    "✅",
];

/// Whether `text` asks a running Coder to stop ("stop", "cancel", …) and nothing more.
pub fn is_stop(text: &str) -> bool {
    matches!(
        normalize(text).as_str(),
        "stop" | "cancel" | "abort" | "para" | "stop it" | "cancel it"
    )
}

/// Whether `text` asks to undo the Coder's last run ("undo", "deshacer", …) and nothing more.
pub fn is_undo(text: &str) -> bool {
    matches!(
        normalize(text).as_str(),
        "undo" | "undo that" | "undo it" | "revert" | "revert that" | "deshacer" | "deshaz"
    )
}

/// Whether `text` is an approval and nothing more.
pub fn is_approval(text: &str) -> bool {
    let normalized = normalize(text);
    !normalized.is_empty() && APPROVALS.contains(&normalized.as_str())
}

/// Lower-cased, without `<@U…>` mentions or `@codebutler.*` addresses, trailing and leading
/// punctuation stripped, inner whitespace collapsed.
pub(super) fn normalize(text: &str) -> String {
    let words: Vec<String> = text
        .split_whitespace()
        .filter(|w| !(w.starts_with("<@") && w.ends_with('>')))
        .filter(|w| !w.to_lowercase().starts_with("@codebutler"))
        .map(|w| w.to_lowercase())
        .collect();
    let joined = words.join(" ");
    if APPROVALS.contains(&joined.as_str()) {
        return joined;
    }
    joined
        .trim_matches(|c: char| c.is_ascii_punctuation() || c == '¡' || c == '¿')
        .to_owned()
}

/// Whether `text` asks to bring the thread's branch up to date and nothing more.
pub fn is_rebase(text: &str) -> bool {
    matches!(
        normalize(text).as_str(),
        "rebase"
            | "rebase it"
            | "rebase the branch"
            | "update the branch"
            | "update branch"
            | "bring it up to date"
            | "bring the branch up to date"
    )
}

/// Words that decline a proposed round (compared normalized, the whole message).
const DECLINES: [&str; 6] = ["no", "nope", "no thanks", "leave them", "leave it", "skip"];

/// Whether `text` declines a proposed round.
pub fn is_decline(text: &str) -> bool {
    DECLINES.contains(&normalize(text).as_str())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rebase_is_the_whole_message() {
        for yes in [
            "rebase",
            "Rebase!",
            "<@U0BOT> rebase",
            "update the branch",
            "bring it up to date.",
        ] {
            assert!(is_rebase(yes), "{yes:?}");
        }
        for no in [
            "rebase onto the lexer branch",
            "merge",
            "update",
            "no rebase",
        ] {
            assert!(!is_rebase(no), "{no:?}");
        }
    }

    #[test]
    fn declines_are_the_whole_message() {
        for text in ["no", "No.", "<@U0BOT> nope", "leave them", "skip!"] {
            assert!(is_decline(text), "{text:?}");
        }
        for text in ["no, change the name instead", "yes", "not now, later maybe"] {
            assert!(!is_decline(text), "{text:?}");
        }
    }

    #[test]
    fn plain_approvals_count_whatever_their_case_and_punctuation() {
        for text in [
            "yes",
            "Yes!",
            "  YES.  ",
            "sí",
            "¡Dale!",
            "go",
            "LGTM",
            "ship it!!",
            "👍",
            ":+1:",
            "<@U0BOT> yes",
            "@codebutler.pm go ahead",
        ] {
            assert!(is_approval(text), "{text:?}");
        }
    }

    #[test]
    fn stop_words_stop_and_nothing_else_does() {
        for text in ["stop", "Cancel!", "<@U0BOT> stop"] {
            assert!(is_stop(text), "{text:?}");
        }
        for text in ["stop using tabs", "don't cancel", "yes"] {
            assert!(!is_stop(text), "{text:?}");
        }
    }

    #[test]
    fn undo_is_only_the_word_itself() {
        for text in ["undo", "Undo!", "<@U0BOT> revert that", "deshacer"] {
            assert!(is_undo(text), "{text:?}");
        }
        for text in ["undo the rename but keep the tests", "don't undo", "stop"] {
            assert!(!is_undo(text), "{text:?}");
        }
    }

    #[test]
    fn anything_more_than_an_approval_goes_back_to_the_pm() {
        for text in [
            "yes but change the test name",
            "yes, and also fix the docs",
            "no",
            "go away",
            "is it ok?x",
            "",
            "   ",
            "okay so what about X",
        ] {
            assert!(!is_approval(text), "{text:?}");
        }
    }
}
