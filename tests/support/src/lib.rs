//! Fakes of CodeButler's outside world for end-to-end tests that spawn the real daemon:
//!
//! * [`FakeSlack`] — the Slack Web API and Socket Mode, as `slack-morphism` 2.31 speaks them.
//! * [`FakeModel`] — an OpenAI-compatible `POST /v1/chat/completions` (OpenRouter flavour),
//!   scripted per conversation and checking requests like a strict provider.
//! * [`images::FakeImages`] — OpenAI's images API (generations and edits), answering real
//!   PNGs derived from each request.
//! * [`install_fake_gh`] — a `gh` shell script that logs its invocations, with the pull
//!   requests and issues of [`gh_items`] for tests that refer to them.
//! * [`mcp`] — the reference MCP server (`server-everything`, a real one from npm) over
//!   streamable HTTP behind a recording proxy that checks the bearer token.
//! * [`goproxy`] — a file-based Go module proxy serving Debian's source of real modules,
//!   for proxy.golang.org.
//! * [`web`] — a local web server standing for a site, recording every request (the
//!   researcher's pages, a host the fetch rules refuse).
//!
//! Plus [`git`], the fixture tests build repositories with, [`large_repo`], the benchmarks'
//! large repository, [`merge`] for layering JSON
//! configs, [`wait_until`], a small polling helper, [`mounts`], the clean-up of the disk
//! mounts a daemon under test leaves, [`postgres`], a throw-away PostgreSQL cluster per
//! test process, [`host`], a host without one of the kernel features the sandbox needs,
//! [`systemd`], a stand-in `systemctl` and `journalctl` for hosts where no systemd runs, and
//! [`terminal`], a real terminal (tmux) to drive an interactive program in.

#![allow(clippy::unwrap_used, clippy::expect_used)]

pub mod gh;
pub mod gh_items;
pub mod git;
pub mod goproxy;
pub mod host;
pub mod images;
pub mod large_repo;
pub mod mcp;
pub mod model;
pub mod mounts;
pub mod pdf;
pub mod postgres;
pub mod slack;
pub mod systemd;
pub mod terminal;
pub mod web;

pub use gh::{
    FakePr, gh_edited_bodies, gh_edited_body, gh_log, gh_merges, gh_pr_body, install_fake_gh,
};
pub use gh_items::FakeItem;
pub use model::{FakeModel, Recorded, Reply};
pub use slack::{
    APP_ID, APP_TOKEN, Ack, BOT_ID, BOT_TOKEN, BOT_USER_ID, CHANNEL, Call, FakeSlack, Post,
    Reaction, Sent, Stall, TEAM_ID, Update, Upload,
};

use std::time::{Duration, Instant};

use serde_json::Value;

/// Merges `over` into `base`: objects key by key, recursively; anything else replaces what
/// `base` has at that place.
pub fn merge(base: &mut Value, over: Value) {
    match (base, over) {
        (Value::Object(base), Value::Object(over)) => {
            for (key, value) in over {
                match base.get_mut(&key) {
                    Some(existing) => merge(existing, value),
                    None => {
                        base.insert(key, value);
                    }
                }
            }
        }
        (base, over) => *base = over,
    }
}

/// Polls `condition` every ~20 ms until it returns true (→ `true`) or `timeout` passes
/// (→ `false`, after one last check).
pub async fn wait_until(timeout: Duration, mut condition: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + timeout;
    loop {
        if condition() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[cfg(test)]
mod tests;
