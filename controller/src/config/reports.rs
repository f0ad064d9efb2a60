//! Reports posted on a schedule (`reports`): `weekly`, the week's spend in the repository's
//! channel each Monday (off by default).

use serde::Deserialize;

/// Which scheduled reports a repository's channel gets.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ReportsConfig {
    /// The weekly cost summary: spend per person and per model, the most expensive threads
    /// of the week before, posted in the channel from Monday 09:00 UTC.
    #[serde(default)]
    pub weekly: bool,
}
