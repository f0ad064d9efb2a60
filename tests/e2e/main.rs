//! End-to-end tests: the real `codebutler` binary against the fake Slack and the fake model
//! server of `codebutler-test-support`, with real git repositories.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod harness;

mod access;
mod ai_surface;
mod approval;
mod boundary;
mod build_limits;
mod byproducts;
mod caching;
mod chaos;
mod close;
mod compaction;
mod config_errors;
mod containers;
mod coordination;
mod dashboard;
mod followups;
mod gh_cli;
mod hosts;
mod intake;
mod lifecycle;
mod links;
mod log_file;
mod memory;
mod merge_reviews;
mod orphans;
mod output;
mod payloads;
mod pm;
mod postflight;
mod postgres;
mod pr_bodies;
mod pr_journal;
mod prepare_ahead;
mod project_tests;
mod provider_failures;
mod pushes;
mod questions;
mod quick_messages;
mod rebase;
mod references;
mod resilience;
mod review_access;
mod reviews;
mod runners;
mod service_manager;
mod setup;
mod team;
mod toolchains;
mod waiting_runs;
mod weekly_report;
mod wizard;
mod worktree;
