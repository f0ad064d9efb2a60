//! The CodeButler controller: the daemon that lives in a Slack channel. It holds every
//! secret and all network access; see `DESIGN.md` for the architecture.
//!
//! Modules, each with one job: [`config`] (files and environment), [`layout`]
//! (`.codebutler/`), [`store`] (sqlx), [`slack`] (Socket Mode intake, Web API sender,
//! formatting), [`threads`] (one task per thread), [`routing`] (`@codebutler.<role>`),
//! [`gateway`] (every model call), [`pm`] (the PM's tool loop), [`daemon`] (wiring),
//! [`reconcile`] (what a crash left, sorted out at start), [`logging`].

pub mod approval;
pub mod budget;
pub mod coder;
pub mod config;
pub mod daemon;
#[doc(hidden)]
pub mod fuzzing;
pub mod gateway;
pub mod layout;
pub mod logging;
pub mod pm;
pub mod pricing;
pub mod prompts;
pub mod questions;
pub mod reconcile;
pub mod routing;
pub mod runnerctl;
pub mod runners;
pub mod secret;
pub mod slack;
pub mod store;
pub mod threads;
pub mod tls;
