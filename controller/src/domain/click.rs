//! A button click, as a thread keeps it: the text of the stored thread message a click
//! becomes, so it takes the same durable, ordered path as a typed message.
//!
//! The marker starts with `<codebutler:click`: Slack escapes `<` in what people type (as
//! `&lt;`), so no typed message can pass for a click.

const MARKER: &str = "<codebutler:click";

/// Which button was clicked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ButtonAction {
    /// Approve the plan shown in the message.
    Approve,
    /// Withdraw the plan shown in the message.
    CancelPlan,
    /// Stop the running Coder whose status the message shows.
    StopRun,
    /// Draw the Artist's proposal shown in the message.
    DrawIt,
    /// Drop the Artist's proposal shown in the message.
    CancelDrawing,
}

impl ButtonAction {
    /// The word the stored marker carries.
    pub fn word(self) -> &'static str {
        match self {
            Self::Approve => "approve",
            Self::CancelPlan => "cancel-plan",
            Self::StopRun => "stop-run",
            Self::DrawIt => "draw-it",
            Self::CancelDrawing => "cancel-drawing",
        }
    }

    /// The button's name in the history and the journal.
    pub fn label(self) -> &'static str {
        match self {
            Self::Approve => "Approve",
            Self::CancelPlan => "Cancel",
            Self::StopRun => "Stop",
            Self::DrawIt => "Draw it",
            Self::CancelDrawing => "Cancel",
        }
    }

    /// The action a stored marker's word names.
    pub fn from_word(word: &str) -> Option<Self> {
        [
            Self::Approve,
            Self::CancelPlan,
            Self::StopRun,
            Self::DrawIt,
            Self::CancelDrawing,
        ]
        .into_iter()
        .find(|a| a.word() == word)
    }
}

/// A button click, as carried in the text of its stored thread message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Click {
    pub action: ButtonAction,
    /// The ts of the message that carries the button.
    pub message_ts: String,
    /// The button's `value` (for Approve: the digest of the plan it was shown with).
    pub value: String,
    /// The clicked message's text as Slack had it, to rebuild its blocks without the buttons.
    pub message_text: String,
}

impl Click {
    /// The stored text: a marker line, then the clicked message's text.
    pub fn to_text(&self) -> String {
        format!(
            "{MARKER} {} {} {}>\n{}",
            self.action.word(),
            self.message_ts,
            if self.value.is_empty() {
                "-"
            } else {
                &self.value
            },
            self.message_text
        )
    }

    /// The click a stored message stands for, if it is one.
    pub fn parse(text: &str) -> Option<Click> {
        let (head, rest) = text.split_once('\n').unwrap_or((text, ""));
        let inner = head.strip_prefix(MARKER)?.strip_suffix('>')?;
        let mut words = inner.split_whitespace();
        let action = ButtonAction::from_word(words.next()?)?;
        let message_ts = words.next()?.to_owned();
        let value = match words.next()? {
            "-" => String::new(),
            v => v.to_owned(),
        };
        if words.next().is_some() {
            return None;
        }
        Some(Click {
            action,
            message_ts,
            value,
            message_text: rest.to_owned(),
        })
    }
}
