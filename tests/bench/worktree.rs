//! Worktree creation against `git worktree add`.
//!
//! `cargo bench -p codebutler-controller --bench worktree`
//!
//! On a repository of 3,000 files and one of 30,000 ([`large_repo`]: realistic sizes and
//! depth, packed), in one run: our creation as a run gets it
//! (`workspace::worktree::create`: the slug and branch, the thread's own repository with the
//! base store shared, the files checked out and the index written; `diskMB` 0, to compare
//! like with like) against the real `git worktree add <dir> <commit>` of the same commit on
//! the same repository, into the same filesystem, the two alternating (who goes first
//! alternates too) with both object stores warm in the page cache. Each worktree is removed
//! again after it is measured, outside the timing. Then `git status --porcelain` in a
//! fresh worktree of each kind: a checkout whose index lacks stat data makes git rehash
//! every file here. On the 3,000 files, creation on a disk of its own (`diskMB` 512: image,
//! `mkfs.ext4`, loop mount) is measured too when this machine can make one.
//!
//! The whole measurement runs [`RUNS`] times and prints each run's p50 / p99 and their
//! medians.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use codebutler_controller::workspace::{disk, worktree};
use codebutler_test_support::large_repo;

/// Repository sizes and rounds per run.
const SIZES: [(usize, usize); 2] = [(3_000, 16), (30_000, 6)];
/// Times the whole measurement is repeated; medians are printed.
const RUNS: usize = 3;
/// The disk of the disk variant, in MB.
const DISK_MB: u64 = 512;

fn main() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(run());
}

/// One run's samples of one kind.
#[derive(Default)]
struct Samples(Vec<Duration>);

impl Samples {
    fn pct(&self, p: f64) -> Duration {
        let mut sorted = self.0.clone();
        sorted.sort();
        sorted[(((p / 100.0) * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len()) - 1]
    }
}

async fn run() {
    let can_disk = disk::probe().is_ok();
    for (files, rounds) in SIZES {
        let dir = tempfile::tempdir().unwrap();
        let _mounts = codebutler_test_support::mounts::DetachOnDrop(dir.path().to_owned());
        let repo = dir.path().join("repo");
        std::fs::create_dir(&repo).unwrap();
        let started = Instant::now();
        let commit = large_repo::build(&repo, files);
        println!(
            "worktree benchmark: {files} files (fixture built in {:.1} s), {rounds} rounds × {RUNS} runs",
            started.elapsed().as_secs_f64()
        );
        let outside = dir.path().join("git-worktrees");
        std::fs::create_dir(&outside).unwrap();
        // Warm-up, and the first creation on a new base commit (packs its base store). The
        // worktree is kept: it holds the base store for the measured ones, as a thread does.
        let start = Instant::now();
        let kept = worktree::create(&repo, "kept", None, worktree::DiskBudget::NONE)
            .await
            .unwrap();
        println!(
            "  first creation on a new base commit (packs the base store): {:.1} ms",
            ms(start.elapsed())
        );
        git_add(&repo, &outside.join("warm"), &commit);
        git_remove(&repo, &outside.join("warm"));

        let (mut ours_p, mut git_p, mut disk_p) = (Vec::new(), Vec::new(), Vec::new());
        for run in 0..RUNS {
            let (mut ours, mut git, mut on_disk) =
                (Samples::default(), Samples::default(), Samples::default());
            for i in 0..rounds {
                let name = format!("bench {run} {i}");
                let target = outside.join(format!("w{run}-{i}"));
                let git_first = i % 2 == 1;
                if git_first {
                    git.0.push(git_add(&repo, &target, &commit));
                }
                let start = Instant::now();
                let tree = worktree::create(&repo, &name, None, worktree::DiskBudget::NONE)
                    .await
                    .unwrap();
                ours.0.push(start.elapsed());
                if !git_first {
                    git.0.push(git_add(&repo, &target, &commit));
                }
                assert!(tree.path.join(".gitignore").is_file());
                worktree::remove(&repo, &tree).await.unwrap();
                git_remove(&repo, &target);
                if can_disk && files <= 3_000 {
                    let start = Instant::now();
                    let tree = worktree::create(
                        &repo,
                        &format!("{name} disk"),
                        None,
                        worktree::DiskBudget::per_disk(DISK_MB),
                    )
                    .await
                    .unwrap();
                    on_disk.0.push(start.elapsed());
                    worktree::remove(&repo, &tree).await.unwrap();
                }
            }
            println!(
                "  run {}: ours p50 {:.1} / p99 {:.1} ms, git worktree add p50 {:.1} / p99 {:.1} ms",
                run + 1,
                ms(ours.pct(50.0)),
                ms(ours.pct(99.0)),
                ms(git.pct(50.0)),
                ms(git.pct(99.0)),
            );
            ours_p.push((ours.pct(50.0), ours.pct(99.0)));
            git_p.push((git.pct(50.0), git.pct(99.0)));
            if !on_disk.0.is_empty() {
                disk_p.push((on_disk.pct(50.0), on_disk.pct(99.0)));
            }
        }
        let (o50, o99) = medians(&ours_p);
        let (g50, g99) = medians(&git_p);
        println!("  medians of {RUNS} runs (p50 / p99):");
        println!(
            "    git worktree add (baseline)       {:>9.1} / {:>9.1} ms",
            ms(g50),
            ms(g99)
        );
        println!(
            "    our creation (diskMB 0)           {:>9.1} / {:>9.1} ms   {:.2}× / {:.2}× git",
            ms(o50),
            ms(o99),
            o50.as_secs_f64() / g50.as_secs_f64(),
            o99.as_secs_f64() / g99.as_secs_f64()
        );
        if !disk_p.is_empty() {
            let (d50, d99) = medians(&disk_p);
            println!(
                "    our creation (diskMB {DISK_MB})         {:>9.1} / {:>9.1} ms   {:.2}× / {:.2}× git",
                ms(d50),
                ms(d99),
                d50.as_secs_f64() / g50.as_secs_f64(),
                d99.as_secs_f64() / g99.as_secs_f64()
            );
        }

        // git status in a fresh worktree of each kind.
        let target = outside.join("status");
        git_add(&repo, &target, &commit);
        let ours = worktree::create(&repo, "status", None, worktree::DiskBudget::NONE)
            .await
            .unwrap();
        let (mut in_git, mut in_ours) = (Samples::default(), Samples::default());
        for _ in 0..3 {
            in_ours.0.push(git_status(&ours.path));
            in_git.0.push(git_status(&target));
        }
        println!(
            "    git status, first run after creation: in git's worktree {:.1} ms, in ours {:.1} ms",
            ms(in_git.0[0]),
            ms(in_ours.0[0])
        );
        println!(
            "    git status, later (mean of 2): in git's worktree {:.1} ms, in ours {:.1} ms",
            ms(mean(&in_git.0[1..])),
            ms(mean(&in_ours.0[1..]))
        );
        worktree::remove(&repo, &ours).await.unwrap();
        git_remove(&repo, &target);
        worktree::remove(&repo, &kept).await.unwrap();
    }
}

/// `git worktree add <target> <commit>`, timed.
fn git_add(repo: &Path, target: &Path, commit: &str) -> Duration {
    let start = Instant::now();
    let out = Command::new("git")
        .args(["worktree", "add", "-q"])
        .arg(target)
        .arg(commit)
        .current_dir(repo)
        .output()
        .unwrap();
    let took = start.elapsed();
    assert!(out.status.success(), "git worktree add: {out:?}");
    took
}

fn git_remove(repo: &Path, target: &Path) {
    let out = Command::new("git")
        .args(["worktree", "remove", "--force"])
        .arg(target)
        .current_dir(repo)
        .output()
        .unwrap();
    assert!(out.status.success(), "git worktree remove: {out:?}");
}

/// `git status --porcelain` in `tree`, timed; it must find nothing changed.
fn git_status(tree: &Path) -> Duration {
    let start = Instant::now();
    let out = Command::new("git")
        .args(["status", "--porcelain"])
        .current_dir(tree)
        .output()
        .unwrap();
    let took = start.elapsed();
    assert!(out.status.success(), "git status: {out:?}");
    assert!(
        out.stdout.is_empty(),
        "a fresh worktree shows changes: {}",
        String::from_utf8_lossy(&out.stdout)
    );
    took
}

fn medians(pairs: &[(Duration, Duration)]) -> (Duration, Duration) {
    let mut p50: Vec<Duration> = pairs.iter().map(|p| p.0).collect();
    let mut p99: Vec<Duration> = pairs.iter().map(|p| p.1).collect();
    p50.sort();
    p99.sort();
    (p50[p50.len() / 2], p99[p99.len() / 2])
}

fn mean(samples: &[Duration]) -> Duration {
    samples.iter().sum::<Duration>() / samples.len() as u32
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}
