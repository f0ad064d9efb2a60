//! The CodeButler controller: the daemon that lives in a Slack channel. It holds every
//! secret and all network access; see `controller/ARCHITECTURE.md` for the architecture.
//!
//! ## Floors
//!
//! Each module has one job, and the modules are floors, listed here from the top down: a
//! module imports only from the floors below its own, so the shared vocabulary sits at the
//! bottom and the wiring at the top (`tests/floor_plan.rs` reads this list and fails on an
//! import that climbs, naming the file, the line and the two modules; a new module takes a
//! line here).
//!
//! 1. [`setup`] — `codebutler init`, the set-up wizard: the answers checked as the start
//!    checks them, the config files edited, this host checked;
//! 2. [`service`] — one process for many repositories on one Slack app: the shared Slack
//!    client, sender and Socket Mode connection, events routed by channel, the App Home
//!    tab, one service per app, `--status`, systemd's notify protocol,
//!    `--install`/`--uninstall`/`--logs`, and each repository's part of it
//!    (`service::daemon`, the wiring);
//! 3. [`dashboard`] — the read-only dashboard and `/metrics`: threads, live runs,
//!    the log and costs of the repositories the service serves;
//! 4. [`fuzzing`] — entry points for the fuzz targets, and their property checks;
//! 5. [`thread`] — intake and the thread as a state machine: its state read once per
//!    message, the command the message gives, the handler applying it (approvals, routing,
//!    the PM's turn, the Coder's commands, a close);
//! 6. [`reconcile`] — what a crash left, sorted out at start;
//! 7. [`coder`] — Coder runs as a thread sees them (start, continue, undo, status);
//! 8. [`postflight`] — the steps once a thread's pull request opened (TODO scan, PR
//!    description, memory proposal);
//! 9. [`journal`] — what a thread leaves behind: the PR description, the thread's journal,
//!    the usage report posted at close;
//! 10. [`coordination`] — threads working on one repository at once: their scopes, overlaps
//!     and conflicts, the merge order, notices after a merge;
//! 11. [`closing`] — the PR watcher, which closes threads whose PR ended on GitHub, and the
//!     review loop of an open PR;
//! 12. [`dispatch`] — one task per active Slack thread, fed from the store, which whatever
//!     stores a message for a thread wakes;
//! 13. [`artist`] — the Artist: its image prompt, drawing through the images API, the
//!     image committed to the thread's branch;
//! 14. [`pm`] — the PM's tool loop, its tools, and its answers to the Coder's questions;
//! 15. [`admin`] — the admin socket and the `runnerctl` client;
//! 16. [`runners`] — sandboxed runner processes (launcher, supervisor, hub, web fetches,
//!     resume);
//! 17. [`memory`] — memory people approve in the thread: extraction, proposals, commits to
//!     the PR branch or a memory PR, the default branch's memory;
//! 18. [`history`] — a thread's history in time order, read back from the store;
//! 19. [`workspace`] — the worktrees runs work in (per-thread repositories and disks,
//!     platform preparation, checkpoints, commits, pushes and pull requests);
//! 20. [`gateway`] — every model call, pricing, and a thread's Coder budget;
//! 21. [`slack`] — Socket Mode intake, the Web API sender and its outbox, formatting;
//! 22. [`config`] — files and environment, each setting typed;
//! 23. [`store`] — sqlx persistence;
//! 24. [`prompts`] — role prompts;
//! 25. [`repo_files`] — a repository's files read without following a link (committed
//!     blobs, the working copy);
//! 26. [`repo_lock`] — one daemon per repository;
//! 27. [`layout`] — `.codebutler/`: where each thing lives in it, and its creation;
//! 28. [`metrics`] — the process's Prometheus figures, bumped where things happen;
//! 29. [`logging`] — plain and JSON logs;
//! 30. [`tls`] — the one process-wide TLS provider of outgoing connections;
//! 31. [`secret`] — a string that never shows itself;
//! 32. [`domain`] — the shared vocabulary (threads, their states, messages, plans, roles,
//!     runs, usage, memory operations, the PR watcher's events, coordination notices),
//!     plain data.

pub mod admin;
pub mod artist;
pub mod closing;
pub mod coder;
pub mod config;
pub mod coordination;
pub mod dashboard;
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
pub mod metrics;
pub mod pm;
pub mod postflight;
pub mod prompts;
pub mod reconcile;
pub mod repo_files;
pub mod repo_lock;
pub mod runners;
pub mod secret;
pub mod service;
pub mod setup;
pub mod slack;
pub mod store;
pub mod thread;
pub mod tls;
pub mod workspace;
