//! Slack: the Web API client and sender, the Socket Mode intake, the formatting of replies
//! (Markdown to mrkdwn, splitting, snippets), and the outbox every effect in Slack goes
//! through so it happens exactly once ([`effects`] as data, [`outbox`] delivering them).

pub mod api;
pub mod assistant;
pub mod effects;
pub mod files;
pub mod format;
pub mod intake;
pub mod interactive;
pub mod nodelay;
pub mod outbox;
pub mod socket;
pub mod workspace;
