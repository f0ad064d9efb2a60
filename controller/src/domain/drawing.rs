//! The Artist's drawings in a thread: what the Artist proposed (a prompt and where the image
//! would go), whether a person had it drawn, and whether the image went into the branch.
//! Plain data; the store keeps them (`store/drawings.rs`).

/// Where a drawing is in its life.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DrawingStage {
    /// The prompt and its price are shown; "draw it" or "cancel" answers it.
    Proposed,
    /// The image is drawn and posted; "use it", "use it at <path>" or "again" answers it.
    Drawn,
    /// The image was committed to the thread's branch.
    Used,
    /// Cancelled, or replaced by a newer proposal.
    Cancelled,
}

impl DrawingStage {
    /// The stage as stored.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Proposed => "proposed",
            Self::Drawn => "drawn",
            Self::Used => "used",
            Self::Cancelled => "cancelled",
        }
    }

    /// The stage stored as `name`, if it is one.
    pub fn parse(name: &str) -> Option<Self> {
        [Self::Proposed, Self::Drawn, Self::Used, Self::Cancelled]
            .into_iter()
            .find(|s| s.as_str() == name)
    }
}

/// One drawing of a thread.
#[derive(Clone, Debug, PartialEq)]
pub struct Drawing {
    /// Its number in the thread, from 1.
    pub number: i64,
    /// The image prompt the Artist wrote.
    pub prompt: String,
    /// Where in the repository the image would go (checked: see `artist::path`).
    pub path: String,
    /// The image's size, `<width>x<height>`.
    pub size: String,
    /// The attachment the image edits (its stored name under `.codebutler/attachments/`),
    /// when the message that asked for it shared an image.
    pub base: Option<String>,
    pub stage: DrawingStage,
}
