//! The CodeButler controller: the daemon that lives in a Slack channel. It holds every
//! secret and all network access; see `DESIGN.md` for the architecture.
//!
//! Modules, each with one job:
//! - [`domain`] — the shared vocabulary (threads, their states, messages, plans, roles,
//!   runs, usage), plain data;
//! - [`dispatch`] — one task per active Slack thread, fed from the store;
//! - [`thread`] — intake, and the thread as a state machine: its
//!   state read once per message, the command the message gives, the handler applying it
//!   (approvals, routing, budget, the PM's turn, the Coder's commands);
//! - [`pm`] — the PM's tool loop, its tools, and its answers to the Coder's questions;
//! - [`coder`] — Coder runs as a thread sees them (start, continue, undo, status);
//! - [`postflight`] — the steps once a thread's pull request opened (TODO scan, PR
//!   description, memory proposal);
//! - [`memory`] — memory people approve in the thread: extraction, proposals and their
//!   grammar, commits to the PR branch or a memory PR, the default branch's memory;
//! - [`history`] — a thread's history in time order, read back from the store;
//! - [`journal`] — what a thread leaves behind: the PR description, the thread's journal,
//!   the usage report posted at close;
//! - [`closing`] — the PR watcher, which closes threads whose PR ended on GitHub;
//! - [`coordination`] — threads working on one repository at once: their scopes, overlaps
//!   and conflicts, the merge order, notices after a merge;
//! - [`runners`] — sandboxed runner processes (launcher, supervisor, hub, web fetches, resume);
//! - [`workspace`] — the worktrees runs work in (per-thread repositories and disks, platform
//!   preparation, checkpoints, commits, pushes and pull requests);
//! - [`admin`] — the admin socket and the `runnerctl` client;
//! - [`gateway`] — every model call, and pricing;
//! - [`slack`] — Socket Mode intake, the Web API sender and its outbox, formatting;
//! - [`store`] — sqlx persistence; [`config`]: files and environment; [`layout`]:
//!   `.codebutler/`; [`repo_lock`]: one daemon per repository; [`repo_files`]: a repository's
//!   files read without following a link (committed blobs, the working copy); [`prompts`]:
//!   role prompts;
//!   [`reconcile`]: what a crash left, sorted out at start; [`logging`], [`secret`], [`tls`];
//! - [`service`] — one process for many repositories on one Slack app: the shared Slack
//!   client, sender and Socket Mode connection, events routed by channel, one service per
//!   app, `--status`, and each repository's part of it (`service::daemon`, the wiring).

pub mod admin;
pub mod closing;
pub mod coder;
pub mod config;
pub mod coordination;
pub mod dispatch;
pub mod domain;
#[doc(hidden)]
pub mod fuzzing;
pub mod gateway;
pub mod history;
pub mod journal;
pub mod layout;
pub mod logging;
pub mod memory;
pub mod pm;
pub mod postflight;
pub mod prompts;
pub mod reconcile;
pub mod repo_files;
pub mod repo_lock;
pub mod runners;
pub mod secret;
pub mod service;
pub mod slack;
pub mod store;
pub mod thread;
pub mod tls;
pub mod workspace;
