//! Threads that end: the PR watcher ([`watcher`]) that notices pull requests merged or
//! closed on GitHub, and the message it stores in the thread for that ([`event`]). What a
//! close does is [`crate::thread`]'s (`close_commands`), so a close from Slack and one from
//! GitHub take the same path.

pub mod event;
pub mod watcher;
