//! A thread's structured plan, as the PM proposes it and people approve it.

use serde::{Deserialize, Serialize};

/// A thread's structured plan.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Plan {
    pub summary: String,
    pub steps: Vec<String>,
    #[serde(default)]
    pub files: Vec<String>,
}

impl Plan {
    /// The plan as a Markdown message for the thread.
    pub fn to_markdown(&self) -> String {
        let mut out = format!("📋 **Plan:** {}\n\n", self.summary);
        for (i, step) in self.steps.iter().enumerate() {
            out.push_str(&format!("{}. {}\n", i + 1, step));
        }
        if !self.files.is_empty() {
            let files: Vec<String> = self.files.iter().map(|f| format!("`{f}`")).collect();
            out.push_str(&format!("\n**Files:** {}\n", files.join(", ")));
        }
        out
    }

    /// The plan as proposed in the thread: the plan, its cost lines (see
    /// [`crate::thread::budget::cost_markdown`]) and how to approve it. The message also carries
    /// Approve and Cancel buttons; typing an approval works as well.
    pub fn proposal_markdown(&self, cost_line: &str) -> String {
        format!(
            "{}\n{cost_line}\n\nApprove with the button below, or type *yes* (or *ship it*, *lgtm*…) to start the Coder.",
            self.to_markdown()
        )
    }
}
