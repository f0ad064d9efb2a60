//! Slack: the Web API client and sender, the Socket Mode intake, and the formatting of
//! replies (Markdown to mrkdwn, splitting, snippets).

pub mod api;
pub mod format;
pub mod intake;
pub mod interactive;
pub mod socket;
