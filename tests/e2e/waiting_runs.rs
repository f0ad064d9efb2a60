//! Runs waiting on the model, as many sit on one machine (tests/bench/README.md, "Many
//! runs on one machine"): each is its runner, the sandbox's PID 1 and the sandboxed Coder
//! loop, and the loop waits on one thread. The memory figures are the benchmark's
//! (`tests/bench/waiting_runs.rs`); this checks the shape they rest on.

use std::collections::HashMap;
use std::time::Duration;

use codebutler_test_support::model::Reply;
use serde_json::json;

use crate::harness::{Env, WAIT, runnerctl, stdout, wait_output};

const RUNS: usize = 3;

#[tokio::test]
async fn runs_waiting_on_the_model_are_three_processes_of_one_thread_each() {
    let env = Env::with_runner(json!({
        "coder": {"maxTurns": 5, "timeout": 5},
        "access": {"maxConcurrentThreads": RUNS}
    }))
    .await;
    env.model.script(
        "PLAN-WAITING",
        (0..RUNS)
            .map(|_| Reply::delayed(Duration::from_secs(120), Reply::text("late")))
            .collect(),
    );
    let daemon = env.start().await;
    let mut threads = Vec::new();
    for i in 0..RUNS {
        let plan = env.outside.path().join(format!("plan-{i}.md"));
        std::fs::write(&plan, format!("PLAN-WAITING {i}")).unwrap();
        let out = stdout(
            &runnerctl(
                &env,
                &[
                    "run",
                    "--detach",
                    "--json",
                    "--plan",
                    plan.to_str().unwrap(),
                ],
            )
            .await,
        );
        let started: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
        threads.push(started["thread"].as_str().unwrap().to_owned());
    }
    assert!(
        codebutler_test_support::wait_until(WAIT, || env.model.requests_for("PLAN-WAITING").len()
            >= RUNS)
        .await,
        "not every run reached the model"
    );

    let trees = run_trees(u32::try_from(daemon.pid()).unwrap());
    assert_eq!(trees.len(), RUNS, "{trees:?}");
    for tree in &trees {
        let depths: Vec<usize> = tree.iter().map(|(depth, _)| *depth).collect();
        assert_eq!(
            depths,
            [0, 1, 2],
            "runner, sandbox init, Coder loop: {tree:?}"
        );
        for (_, pid) in tree {
            assert_eq!(threads_of(*pid), 1, "process {pid} of {tree:?}");
        }
    }

    for thread in &threads {
        runnerctl(&env, &["cancel", thread]).await;
        wait_output(&env, &["show", thread], "state:    cancelled").await;
    }
}

/// For each runner process the daemon started (`codebutler-runner run`), its process tree
/// as (depth, pid), sorted.
fn run_trees(daemon: u32) -> Vec<Vec<(usize, u32)>> {
    let mut children: HashMap<u32, Vec<u32>> = HashMap::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|n| n.parse().ok()) else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue; // gone meanwhile
        };
        let after = &stat[stat.rfind(')').unwrap() + 2..];
        let ppid: u32 = after.split(' ').nth(1).unwrap().parse().unwrap();
        children.entry(ppid).or_default().push(pid);
    }
    let is_runner = |pid: &u32| {
        std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|c| {
            let args: Vec<&[u8]> = c.split(|b| *b == 0).collect();
            args.first()
                .is_some_and(|a| a.ends_with(b"codebutler-runner"))
                && args.get(1) == Some(&&b"run"[..])
        })
    };
    let mut trees = Vec::new();
    for runner in children
        .get(&daemon)
        .into_iter()
        .flatten()
        .filter(|p| is_runner(p))
    {
        let mut tree = Vec::new();
        let mut stack = vec![(0, *runner)];
        while let Some((depth, pid)) = stack.pop() {
            tree.push((depth, pid));
            for child in children.get(&pid).into_iter().flatten() {
                stack.push((depth + 1, *child));
            }
        }
        tree.sort();
        trees.push(tree);
    }
    trees
}

fn threads_of(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("Threads:"))
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}
