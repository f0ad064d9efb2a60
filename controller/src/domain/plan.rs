//! A thread's structured plan, as the PM proposes it and people approve it.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// A thread's structured plan. It is also the arguments of the PM's ProposePlan tool: the
/// fields' doc comments are the descriptions the PM's model reads, and every field is
/// required, as the tool's schema says.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Plan {
    /// One line: what will be done.
    pub summary: String,
    /// What the Coder will do, in order, citing files and lines.
    pub steps: Vec<String>,
    /// Files that will be created or changed.
    pub files: Vec<String>,
}

impl Plan {
    /// The stored form: what ProposePlan stores and the digest on the plan's buttons is taken
    /// of. It must stay byte-identical for plans stored earlier (a button's digest is
    /// compared with it): serde_json's compact form, fields in declaration order.
    pub fn to_json(&self) -> Result<String, serde_json::Error> {
        serde_json::to_string(self)
    }

    /// A plan from its stored form.
    pub fn from_json(json: &str) -> Result<Self, serde_json::Error> {
        serde_json::from_str(json)
    }

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
    /// [`crate::gateway::budget::cost_markdown`]) and how to approve it. The message also carries
    /// Approve and Cancel buttons; typing an approval works as well.
    pub fn proposal_markdown(&self, cost_line: &str) -> String {
        format!(
            "{}\n{cost_line}\n\nApprove with the button below, or type *yes* (or *ship it*, *lgtm*…) to start the Coder.",
            self.to_markdown()
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Plans as the code before the typed thread state stored them (`serde_json::to_string`
    /// of the plan): reading and writing them again gives the same bytes, so the digest on
    /// their buttons still matches.
    #[test]
    fn stored_plans_keep_their_bytes() {
        for stored in [
            r#"{"summary":"Fix expiry","steps":["Edit `src/auth.rs:42`","Add a test"],"files":["src/auth.rs"]}"#,
            r#"{"summary":"Añadir \"ñ\" y emoji 🚀","steps":["línea 1\nlínea 2","tab\there / slash"],"files":[]}"#,
        ] {
            let plan = Plan::from_json(stored).unwrap();
            assert_eq!(plan.to_json().unwrap(), stored);
        }
    }
}
