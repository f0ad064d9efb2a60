//! The cost of a `connect` inside the sandbox, where the sandbox's PID 1 performs it.
//!
//! `cargo bench -p codebutler-runner --bench connect`
//!
//! A Python client connects `ROUNDS` times to a Unix stream server (in `/tmp`, accepting in
//! a thread) and times each `connect`; the same script runs in the sandbox
//! (`sandbox-exec`) and with `"mode": "none"` (no sandbox: the baseline). The difference
//! is what the connect filter and PID 1 add to one `connect`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::Command;

const ROUNDS: usize = 5000;

const SCRIPT: &str = r#"
import socket, sys, threading, time
rounds = int(sys.argv[1])
server = socket.socket(socket.AF_UNIX)
server.bind("/tmp/bench.sock")
server.listen(128)
def accept():
    while True:
        server.accept()[0].close()
threading.Thread(target=accept, daemon=True).start()
times = []
for _ in range(rounds):
    c = socket.socket(socket.AF_UNIX)
    t = time.perf_counter_ns()
    c.connect("/tmp/bench.sock")
    times.append(time.perf_counter_ns() - t)
    c.close()
times.sort()
print(times[len(times) // 2], times[len(times) * 99 // 100])
"#;

fn measure(mode: &str) -> (f64, f64) {
    let worktree = tempfile::tempdir().unwrap();
    let spec = worktree.path().join("spec.json");
    let inside = worktree.path().join("w");
    std::fs::create_dir(&inside).unwrap();
    std::fs::write(
        &spec,
        serde_json::json!({"worktree": inside, "mode": mode}).to_string(),
    )
    .unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_codebutler-runner"))
        .arg("sandbox-exec")
        .arg("--spec")
        .arg(&spec)
        .args(["--", "/usr/bin/python3", "-c", SCRIPT, &ROUNDS.to_string()])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let text = String::from_utf8(out.stdout).unwrap();
    let mut fields = text
        .split_whitespace()
        .map(|v| v.parse::<f64>().unwrap() / 1000.0);
    (fields.next().unwrap(), fields.next().unwrap())
}

fn main() {
    // The /tmp server of "mode": "none" is the host's /tmp.
    let _ = std::fs::remove_file("/tmp/bench.sock");
    let (bare_p50, bare_p99) = measure("none");
    let _ = std::fs::remove_file("/tmp/bench.sock");
    let (p50, p99) = measure("enforce");
    println!("connect, {ROUNDS} rounds   p50 µs   p99 µs");
    println!("no sandbox            {bare_p50:>8.1} {bare_p99:>8.1}");
    println!("sandbox (via PID 1)   {p50:>8.1} {p99:>8.1}");
    println!(
        "added by the sandbox  {:>8.1} {:>8.1}",
        p50 - bare_p50,
        p99 - bare_p99
    );
}
