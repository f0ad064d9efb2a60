//! The PM's Grep and ListFiles against ripgrep.
//!
//! `cargo bench -p codebutler-controller --bench search` (needs `rg` on `PATH`)
//!
//! On a repository of 30,000 files ([`large_repo`]: realistic sizes and depth, a
//! `.gitignore`), in one run: the PM's tools called as the PM calls them (taken from
//! `repository_tools`, `call` with JSON arguments, the text the model reads) against `rg -n
//! PATTERN` (line numbers, as the tool gives them) and `rg --files` run in the repository,
//! their whole output read from a pipe. Grep for a rare literal (three matches: every file
//! searched), a common literal and a regex (both far past the tool's 100-match cap);
//! ListFiles for `**/*.rs` and for `*.sh` (both walk every directory). Each pair alternates,
//! who goes first alternating too, everything warm in the page cache.
//!
//! The whole measurement runs [`RUNS`] times and prints each run's p50 / p99 and their
//! medians.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use codebutler_agent::tools::path::RepoRoot;
use codebutler_agent::tools::repository_tools;
use codebutler_test_support::large_repo;
use serde_json::json;

const FILES: usize = 30_000;
const ROUNDS: usize = 10;
/// Times the whole measurement is repeated; medians are printed.
const RUNS: usize = 3;

fn main() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(run());
}

/// One comparison: the tool and its arguments, and rg's arguments.
struct Case {
    name: &'static str,
    tool: &'static str,
    args: serde_json::Value,
    rg: Vec<&'static str>,
}

async fn run() {
    let rg = Command::new("rg").arg("--version").output();
    assert!(
        rg.is_ok_and(|o| o.status.success()),
        "this benchmark compares with ripgrep: install it (apt-get install ripgrep)"
    );
    let dir = tempfile::tempdir().unwrap();
    let repo = dir.path().join("repo");
    std::fs::create_dir(&repo).unwrap();
    let started = Instant::now();
    large_repo::build(&repo, FILES);
    println!(
        "search benchmark: {FILES} files (fixture built in {:.1} s), {ROUNDS} rounds × {RUNS} runs",
        started.elapsed().as_secs_f64()
    );
    let tools = repository_tools(Arc::new(RepoRoot::new(&repo).unwrap()));
    let tool = |name: &str| {
        Arc::clone(
            tools
                .iter()
                .find(|t| t.spec().name == name)
                .expect("a repository tool"),
        )
    };
    let cases = [
        Case {
            name: "Grep, rare literal",
            tool: "Grep",
            args: json!({"pattern": large_repo::RARE}),
            rg: vec!["-n", large_repo::RARE],
        },
        Case {
            name: "Grep, common literal",
            tool: "Grep",
            args: json!({"pattern": large_repo::COMMON}),
            rg: vec!["-n", large_repo::COMMON],
        },
        Case {
            name: "Grep, regex",
            tool: "Grep",
            args: json!({"pattern": large_repo::REGEX}),
            rg: vec!["-n", large_repo::REGEX],
        },
        Case {
            name: "ListFiles **/*.rs",
            tool: "ListFiles",
            args: json!({"pattern": "**/*.rs"}),
            rg: vec!["--files"],
        },
        Case {
            name: "ListFiles *.sh",
            tool: "ListFiles",
            args: json!({"pattern": "*.sh"}),
            rg: vec!["--files"],
        },
    ];

    // What the tools answer is what rg finds.
    let rare = tool("Grep")
        .call(json!({"pattern": large_repo::RARE}))
        .await
        .unwrap();
    let mut by_rg: Vec<String> = rg_output(&repo, &["-n", large_repo::RARE])
        .lines()
        .map(str::to_owned)
        .collect();
    by_rg.sort();
    assert_eq!(
        rare.lines().collect::<Vec<_>>(),
        by_rg,
        "Grep and rg disagree"
    );
    assert_eq!(by_rg.len(), 3);

    let mut medians = Vec::new();
    for case in &cases {
        let called = tool(case.tool);
        let (mut ours_p, mut rg_p) = (Vec::new(), Vec::new());
        for _ in 0..RUNS {
            let (mut ours, mut theirs) = (Vec::new(), Vec::new());
            // Warm both.
            called.call(case.args.clone()).await.unwrap();
            rg_output(&repo, &case.rg);
            for i in 0..ROUNDS {
                if i % 2 == 1 {
                    theirs.push(time_rg(&repo, &case.rg));
                }
                let start = Instant::now();
                let out = called.call(case.args.clone()).await.unwrap();
                ours.push(start.elapsed());
                assert!(!out.starts_with("no "), "{}: {out}", case.name);
                if i % 2 == 0 {
                    theirs.push(time_rg(&repo, &case.rg));
                }
            }
            ours_p.push((pct(&ours, 50.0), pct(&ours, 99.0)));
            rg_p.push((pct(&theirs, 50.0), pct(&theirs, 99.0)));
        }
        medians.push((case, median(&ours_p), median(&rg_p)));
    }
    println!("medians of {RUNS} runs (p50 / p99, ms):");
    for (case, ours, theirs) in medians {
        println!(
            "  {:<22} tool {:>7.1} / {:>7.1}   rg {} {:>7.1} / {:>7.1}   {:.2}× / {:.2}×",
            case.name,
            ms(ours.0),
            ms(ours.1),
            case.rg.join(" "),
            ms(theirs.0),
            ms(theirs.1),
            ours.0.as_secs_f64() / theirs.0.as_secs_f64(),
            ours.1.as_secs_f64() / theirs.1.as_secs_f64(),
        );
    }
}

/// rg's standard output in `repo` (its exit status 0: something found).
fn rg_output(repo: &Path, args: &[&str]) -> String {
    let out = Command::new("rg")
        .args(args)
        .current_dir(repo)
        .output()
        .unwrap();
    assert!(out.status.success(), "rg {args:?}: {:?}", out.status);
    String::from_utf8(out.stdout).unwrap()
}

fn time_rg(repo: &Path, args: &[&str]) -> Duration {
    let start = Instant::now();
    let out = rg_output(repo, args);
    let took = start.elapsed();
    assert!(!out.is_empty());
    took
}

fn pct(samples: &[Duration], p: f64) -> Duration {
    let mut sorted = samples.to_vec();
    sorted.sort();
    sorted[(((p / 100.0) * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len()) - 1]
}

fn median(pairs: &[(Duration, Duration)]) -> (Duration, Duration) {
    let mut p50: Vec<Duration> = pairs.iter().map(|p| p.0).collect();
    let mut p99: Vec<Duration> = pairs.iter().map(|p| p.1).collect();
    p50.sort();
    p99.sort();
    (p50[p50.len() / 2], p99[p99.len() / 2])
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}
