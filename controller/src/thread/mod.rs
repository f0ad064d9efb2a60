//! A Slack thread's handling. Messages come in through [`intake`] and are handled one at a
//! time per thread ([`crate::dispatch`]) by the [`handler`]: a person's voice notes are heard and
//! files fetched (`senses`), the thread's [`state`] is read once,
//! the message is classified into a [`command`], and the command is applied
//! (`coder_commands`, `plan_commands`, `pm_turn` with the messages that join a PM's turn
//! in `joined_messages`, `artist_commands`, [`close_commands`], `memory_commands`,
//! `review_commands`, `rebase_commands`). The
//! words it understands are in [`approval`], [`crate::gateway::budget`], [`routing`], [`artist_words`] and [`close_plan`]
//! (a memory proposal's in [`crate::memory::proposal`]), the fixed words it answers with in
//! [`replies`]; who may give which command in [`permissions`]; the `/codebutler` command's
//! answers in [`slash_command`]; [`crate::history`] reads a thread's past back; [`model_switch`] checks a PM model
//! chosen from Slack against the provider's list.

pub mod approval;
mod artist_commands;
pub mod artist_words;
pub mod close_commands;
pub mod close_plan;
mod coder_commands;
pub mod command;
pub mod conversation;
pub mod handler;
pub mod intake;
mod joined_messages;
pub mod lease;
mod live_answer;
mod memory_commands;
pub mod model_switch;
pub mod permissions;
mod plan_commands;
pub mod pm_choice;
mod pm_turn;
mod rebase_commands;
pub mod replies;
mod researcher_turn;
mod review_commands;
mod reviewer_commands;
pub mod routing;
mod senses;
pub mod slash_command;
pub mod state;
mod status_line;
