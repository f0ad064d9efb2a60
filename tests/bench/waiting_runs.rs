//! What a waiting Coder run costs: many runs on one machine.
//!
//! `cargo build --release -p codebutler-runner && cargo bench -p codebutler-controller --bench waiting_runs`
//!
//! Two real daemons (`codebutler`) side by side, each against its own fake Slack and fake
//! model: one stays idle (the baseline), the other gets the runs. Its model holds every
//! Coder request for the whole measurement, so each run waits on the model as a run whose
//! model answers slowly does. Runs start as a person starts them: the PM proposes a plan in
//! a thread (one thread per run) and someone types "yes"; a run counts once the fake model
//! holds its first request. Idle, then with N = 10, then N = 50 runs waiting:
//! - the controller's RSS (`VmRSS`) and PSS (`smaps_rollup`), open descriptors and threads;
//!   the increment per run is (at N − before any run) / N; its CPU over [`QUIET`] seconds
//!   in which nothing is sent, and the runs' CPU then;
//! - each run's processes — the runner (the sandbox's supervisor, in the host's PID
//!   namespace), the sandbox's PID 1 (its init) and the sandboxed Coder loop — each with
//!   `VmRSS`, PSS, threads and open descriptors. RSS counts the pages of the one
//!   `codebutler-runner` binary and its libraries in every process that maps them; PSS
//!   divides each shared page among its sharers, so the PSS of all the runs adds up to the
//!   memory they really hold;
//! - the Slack ack latency of user messages (stored before the ack): `PROBES` messages at
//!   `RATE` per second to each daemon in the same window, into 20 new threads per phase the
//!   PM answers (so each phase's PM calls are the same size).
//!   Sending to both at once keeps what else the machine does at that moment (other
//!   builds, disk writes) out of the comparison; before any run the two daemons are
//!   compared too, which shows the measure's own spread.
//!
//! The whole sequence runs `REPEATS` times, each with fresh daemons and repositories; every
//! figure printed at the end is the median of the repetitions.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use codebutler_test_support::git;
use codebutler_test_support::model::{FakeModel, Reply};
use codebutler_test_support::slack::{self, FakeSlack};
use serde_json::json;

/// The numbers of waiting runs measured, in order (each adds runs to the previous).
const SIZES: [usize; 2] = [10, 50];
const REPEATS: usize = 3;
/// Ack probes per phase, and their rate.
/// 25 a second: the probes and the PM's answers to them must not fill the two cores
/// themselves (at 100 a second the two daemons' answering alone took most of them, and the
/// comparison measured that contention more than the waiting runs).
const PROBES: usize = 500;
const RATE: u64 = 25;
const PROBE_THREADS: usize = 20;
/// Files of the fixture repository.
const FILES: usize = 300;
/// Every Coder conversation's plan carries this; the fake model holds those requests.
const HOLD: &str = "WAITING-RUNS-BENCH: hold this Coder run on the model";
/// How long the fake model holds a Coder request: longer than any repetition.
const HELD_FOR: Duration = Duration::from_secs(3600);
const USER: &str = "U0BENCH";
/// The window in which the CPU of a daemon with nothing to do (but its waiting runs) is read.
const QUIET: Duration = Duration::from_secs(5);

/// One process's costs, from `/proc`.
#[derive(Clone, Copy, Debug, Default)]
struct Costs {
    rss_kib: u64,
    pss_kib: u64,
    threads: u64,
    fds: u64,
}

impl std::ops::AddAssign for Costs {
    fn add_assign(&mut self, other: Costs) {
        self.rss_kib += other.rss_kib;
        self.pss_kib += other.pss_kib;
        self.threads += other.threads;
        self.fds += other.fds;
    }
}

/// The processes of one run, by their place in its tree.
const ROLES: [&str; 3] = [
    "runner (sandbox supervisor)",
    "sandbox init (PID 1)",
    "sandboxed Coder loop",
];

/// What one repetition measured at one size.
#[derive(Clone, Debug, Default)]
struct AtSize {
    controller: Costs,
    /// Per role, the median over the runs.
    per_role: Vec<Costs>,
    /// A run's processes summed, median over the runs.
    per_run: Costs,
    /// Processes per run (the largest seen).
    processes_per_run: usize,
    /// Ack latencies of the idle daemon and of the one with the runs, in the same window.
    idle_acks: Vec<Duration>,
    acks: Vec<Duration>,
    /// CPU used while nothing happens ([`QUIET`]): the controller's, and all runs' together,
    /// in percent of one core.
    quiet_cpu: (f64, f64),
}

/// One repetition.
#[derive(Clone, Debug, Default)]
struct Repetition {
    idle: Costs,
    /// Before any run: ack latencies of the idle daemon and of the one about to get runs (the
    /// two daemons alike, the measure's own spread).
    idle_acks: Vec<Duration>,
    before_runs_acks: Vec<Duration>,
    idle_cpu: f64,
    sizes: Vec<AtSize>,
}

fn main() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let reps: Vec<Repetition> = (0..REPEATS)
        .map(|i| {
            let rep = runtime.block_on(repetition(i));
            print_repetition(i, &rep);
            rep
        })
        .collect();
    print_medians(&reps);
}

/// One daemon under test with its fakes and repository. Dropped in field order: the
/// daemon (and its runs) first, then the mounts of its worktrees, then the directories.
struct Instance {
    daemon: Daemon,
    _mounts: codebutler_test_support::mounts::DetachOnDrop,
    repo: tempfile::TempDir,
    _home: tempfile::TempDir,
    slack: FakeSlack,
    model: FakeModel,
}

impl Instance {
    async fn start(runner: &Path) -> Instance {
        let repo = tempfile::tempdir().unwrap();
        // The daemon's worktrees are mounts of their own disks: detached however this ends.
        let mounts = codebutler_test_support::mounts::DetachOnDrop(repo.path().to_owned());
        make_repo(repo.path());
        let home = tempfile::tempdir().unwrap();
        let slack = FakeSlack::start().await;
        let model = FakeModel::start().await;
        // The provider carries the PM's model the config names and the Coder's default one.
        model.list("bench/pm-model");
        model.list("anthropic/claude-opus-4.6");
        let max_runs = *SIZES.iter().max().unwrap();
        model.script(
            HOLD,
            (0..max_runs)
                .map(|_| Reply::delayed(HELD_FOR, Reply::text("done")))
                .collect(),
        );
        model.respond("PROBE", |_| Reply::text("Noted."));
        // Each new plan is judged against the other active threads (one PM call).
        model.respond(
            "Judge which of the other threads may interact with the new plan.",
            |_| Reply::text(r#"{"overlaps": []}"#),
        );
        std::fs::write(
            home.path().join("config.json"),
            json!({"slack": {"botToken": slack::BOT_TOKEN, "appToken": slack::APP_TOKEN}, "openrouter": {"apiKey": "sk-or-bench"}}).to_string(),
        )
        .unwrap();
        // The daemon checks at start that `gh` is logged in: the fake one is.
        let gh = codebutler_test_support::gh::install_fake_gh(&home.path().join("fake-gh"));
        std::fs::create_dir_all(repo.path().join(".codebutler")).unwrap();
        std::fs::write(
            repo.path().join(".codebutler/config.json"),
            json!({
                // The model holds the Coder's calls for the whole measurement.
                "openrouter": {"baseUrl": model.base_url(), "maxRetries": 0, "timeoutSeconds": HELD_FOR.as_secs()},
                "slack": {"channelID": slack::CHANNEL, "apiUrl": slack.api_url(), "messagesPerSecond": 0},
                "github": {"cli": gh.display().to_string()},
                "productManager": {"default": "cheap", "models": {"cheap": {"model": "bench/pm-model"}}},
                "sandbox": {"runnerPath": runner.display().to_string()},
                "access": {"maxConcurrentThreads": max_runs, "maxClaudeCallsPerHour": 0}
            })
            .to_string(),
        )
        .unwrap();
        let daemon = Daemon(Some(
            Command::new(env!("CARGO_BIN_EXE_codebutler"))
                .arg("--repo")
                .arg(repo.path())
                .env_clear()
                .env("PATH", std::env::var("PATH").unwrap_or_default())
                .env("CODEBUTLER_HOME", home.path())
                .env(
                    "RUST_LOG",
                    std::env::var("BENCH_DAEMON_LOG").unwrap_or_else(|_| "error".into()),
                )
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .spawn()
                .unwrap(),
        ));
        assert!(
            slack
                .wait_until(Duration::from_secs(30), || slack.open_connections() > 0)
                .await,
            "the daemon did not connect to Slack"
        );
        Instance {
            daemon,
            _mounts: mounts,
            repo,
            _home: home,
            slack,
            model,
        }
    }
}

/// One repetition: two daemons side by side, one that stays idle (the baseline) and one
/// that gets the runs; the ack probes go to both at once, so whatever else the machine
/// does at that moment weighs on both alike.
async fn repetition(index: usize) -> Repetition {
    let runner = Path::new(env!("CARGO_BIN_EXE_codebutler")).with_file_name("codebutler-runner");
    assert!(
        runner.is_file(),
        "build it first: cargo build --release -p codebutler-runner"
    );
    let mut idle = Instance::start(&runner).await;
    let mut loaded = Instance::start(&runner).await;
    assert!(idle.repo.path() != loaded.repo.path());
    tokio::time::sleep(Duration::from_secs(1)).await;
    let pid = loaded.daemon.pid();

    let mut rep = Repetition {
        idle: costs(pid),
        idle_cpu: quiet_cpu(pid, &[]).await.0,
        ..Repetition::default()
    };
    let (idle_acks, acks) = probe(&mut idle, &mut loaded, index, "no runs").await;
    rep.idle_acks = idle_acks;
    rep.before_runs_acks = acks;

    let mut started = 0;
    for &size in &SIZES {
        start_runs(&loaded.slack, &loaded.model, started, size).await;
        started = size;
        // Let the runs settle into their wait (allocations done, nothing in flight).
        tokio::time::sleep(Duration::from_secs(2)).await;
        let controller = costs(pid);
        let runs = run_trees(pid);
        assert_eq!(
            runs.len(),
            size,
            "expected {size} runner processes under the daemon, found {}",
            runs.len()
        );
        let mut per_role: Vec<Vec<Costs>> = vec![Vec::new(); ROLES.len()];
        let mut per_run = Vec::new();
        let mut processes_per_run = 0;
        for tree in &runs {
            processes_per_run = processes_per_run.max(tree.len());
            let mut sum = Costs::default();
            for (depth, pid) in tree {
                let c = costs(*pid);
                sum += c;
                if let Some(role) = per_role.get_mut(*depth) {
                    role.push(c);
                }
            }
            per_run.push(sum);
        }
        let run_pids: Vec<u32> = runs.iter().flatten().map(|(_, p)| *p).collect();
        let quiet_cpu = quiet_cpu(pid, &run_pids).await;
        let (idle_acks, acks) = probe(&mut idle, &mut loaded, index, &format!("{size} runs")).await;
        // Still waiting: none ended during the probes.
        assert_eq!(run_trees(pid).len(), size, "a run ended while measured");
        rep.sizes.push(AtSize {
            controller,
            per_role: per_role.iter().map(|c| median_costs(c)).collect(),
            per_run: median_costs(&per_run),
            processes_per_run,
            idle_acks,
            acks,
            quiet_cpu,
        });
    }
    for instance in [&idle, &loaded] {
        let violations = instance.model.violations();
        assert!(violations.is_empty(), "{violations:?}");
    }
    loaded.daemon.stop();
    idle.daemon.stop();
    rep
}

/// Starts runs `from..to`: a thread each whose plan the PM proposes, then a typed approval;
/// returns once the fake model holds the first request of every one of them.
async fn start_runs(slack: &FakeSlack, model: &FakeModel, from: usize, to: usize) {
    let mut threads = Vec::new();
    for i in from..to {
        let ask = format!("waiting job {i:03}");
        let plan = json!({"summary": format!("{HOLD} {i:03}"), "steps": ["Do it"], "files": []});
        model.script(
            &ask,
            vec![
                Reply::tool_call("ProposePlan", plan.to_string()),
                Reply::text("Plan ready."),
            ],
        );
        threads.push(slack.user_message(slack::CHANNEL, USER, &ask, None).ts);
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    for (i, thread) in threads.iter().enumerate() {
        let planned = slack
            .wait_until(Duration::from_secs(120), || {
                slack
                    .posts()
                    .iter()
                    .any(|p| p.thread_ts.as_deref() == Some(thread.as_str()))
            })
            .await;
        assert!(planned, "no plan in thread {}", from + i);
        slack.user_message(slack::CHANNEL, USER, "yes", Some(thread));
    }
    let waiting = codebutler_test_support::wait_until(Duration::from_secs(300), || {
        model.requests_for(HOLD).len() >= to
    })
    .await;
    assert!(
        waiting,
        "only {} of {to} runs reached the model",
        model.requests_for(HOLD).len()
    );
}

/// Sends `PROBES` user messages at `RATE` to each daemon, to both at each tick (which one
/// first alternates), into new probe threads (the first probes start them); waits for the PM
/// to answer every one, and returns the ack latencies of the idle daemon and the loaded one.
async fn probe(
    idle: &mut Instance,
    loaded: &mut Instance,
    rep: usize,
    phase: &str,
) -> (Vec<Duration>, Vec<Duration>) {
    let posts_before = [&*idle, &*loaded].map(|d| d.slack.calls_of("chat.postMessage").len());
    let mut tick = tokio::time::interval(Duration::from_micros(1_000_000 / RATE));
    let mut envelopes = [Vec::new(), Vec::new()];
    // This phase's threads, started by their first probes.
    let mut threads: [Vec<Option<String>>; 2] =
        [vec![None; PROBE_THREADS], vec![None; PROBE_THREADS]];
    for i in 0..PROBES {
        tick.tick().await;
        let t = i % PROBE_THREADS;
        let text = format!("PROBE {rep}.{t}: {phase}, message {i}");
        let order = if i % 2 == 0 { [0, 1] } else { [1, 0] };
        for k in order {
            let d: &mut Instance = if k == 0 { idle } else { loaded };
            let sent = d
                .slack
                .user_message(slack::CHANNEL, USER, &text, threads[k][t].as_deref());
            if threads[k][t].is_none() {
                threads[k][t] = Some(sent.ts.clone());
            }
            envelopes[k].push(sent.envelope_id);
        }
    }
    let mut latencies = [Vec::new(), Vec::new()];
    for (k, d) in [&*idle, &*loaded].into_iter().enumerate() {
        let slack = &d.slack;
        let acked = slack
            .wait_until(Duration::from_secs(60), || {
                envelopes[k].iter().all(|e| slack.is_acked(e))
            })
            .await;
        assert!(acked, "not every probe was acknowledged");
        let acks: HashMap<String, Instant> = slack
            .acks()
            .into_iter()
            .map(|a| (a.envelope_id, a.at))
            .collect();
        latencies[k] = envelopes[k]
            .iter()
            .map(|e| acks[e].saturating_duration_since(slack.sent_at(e)))
            .collect();
        // The PM's answers are done before the next phase starts.
        let answered = slack
            .wait_until(Duration::from_secs(120), || {
                slack.calls_of("chat.postMessage").len() >= posts_before[k] + PROBES
            })
            .await;
        assert!(answered, "the PM did not answer every probe");
    }
    let [idle_acks, loaded_acks] = latencies;
    (idle_acks, loaded_acks)
}

fn make_repo(root: &Path) {
    for i in 0..FILES {
        let dir = root.join(format!("src/m{}", i % 20));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            dir.join(format!("f{i}.rs")),
            format!("pub fn f{i}() -> u32 {{ {i} }}\n"),
        )
        .unwrap();
    }
    let repo = git::init(root);
    git::commit_all(&repo, "files");
}

/// The daemon under test: stopped with SIGTERM (then SIGKILL) however the benchmark ends,
/// and every process of its runs gone before the repository's mounts are detached.
struct Daemon(Option<Child>);

impl Daemon {
    fn pid(&self) -> u32 {
        self.0.as_ref().unwrap().id()
    }

    fn stop(&mut self) {
        let Some(mut child) = self.0.take() else {
            return;
        };
        let pid = child.id();
        let descendants: Vec<u32> = run_trees(pid)
            .into_iter()
            .flatten()
            .map(|(_, p)| p)
            .collect();
        let pid_t = nix::unistd::Pid::from_raw(i32::try_from(pid).unwrap());
        if let Err(e) = nix::sys::signal::kill(pid_t, nix::sys::signal::Signal::SIGTERM) {
            eprintln!("stop the daemon: {e}");
        }
        let deadline = Instant::now() + Duration::from_secs(60);
        while Instant::now() < deadline {
            if child.try_wait().unwrap().is_some() {
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        if child.try_wait().unwrap().is_none() {
            eprintln!("the daemon did not stop within 60 s; killing it");
            child.kill().unwrap();
            child.wait().unwrap();
        }
        // Its runners end with their hub; the processes this benchmark started are gone
        // before their mounts are detached.
        let deadline = Instant::now() + Duration::from_secs(30);
        while descendants.iter().any(|p| alive(*p)) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(50));
        }
        for p in descendants.iter().filter(|p| alive(**p)) {
            eprintln!("runner process {p} outlived the daemon; killing it");
            let p = nix::unistd::Pid::from_raw(i32::try_from(*p).unwrap());
            if let Err(e) = nix::sys::signal::kill(p, nix::sys::signal::Signal::SIGKILL) {
                eprintln!("kill {p}: {e}");
            }
        }
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        self.stop();
    }
}

fn alive(pid: u32) -> bool {
    Path::new(&format!("/proc/{pid}")).exists()
}

/// The parent of every process, from `/proc/<pid>/stat`.
fn parents() -> HashMap<u32, u32> {
    let mut parents = HashMap::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|n| n.parse().ok()) else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue; // gone meanwhile
        };
        // `pid (comm) state ppid …`: comm may hold spaces and parentheses.
        let after = &stat[stat.rfind(')').unwrap() + 2..];
        let ppid = after.split(' ').nth(1).unwrap().parse().unwrap();
        parents.insert(pid, ppid);
    }
    parents
}

/// The runs under the daemon: for each runner process (a child of the daemon running
/// `codebutler-runner run`), its tree as (depth, pid), the runner at depth 0.
fn run_trees(daemon: u32) -> Vec<Vec<(usize, u32)>> {
    let parents = parents();
    let mut children: BTreeMap<u32, Vec<u32>> = BTreeMap::new();
    for (pid, ppid) in &parents {
        children.entry(*ppid).or_default().push(*pid);
    }
    let runners = children.get(&daemon).cloned().unwrap_or_default();
    runners
        .into_iter()
        .filter(|p| {
            std::fs::read(format!("/proc/{p}/cmdline")).is_ok_and(|c| {
                let args: Vec<&[u8]> = c.split(|b| *b == 0).collect();
                args.first()
                    .is_some_and(|a| a.ends_with(b"codebutler-runner"))
                    && args.get(1) == Some(&&b"run"[..])
            })
        })
        .map(|runner| {
            let mut tree = Vec::new();
            let mut stack = vec![(0, runner)];
            while let Some((depth, pid)) = stack.pop() {
                tree.push((depth, pid));
                for child in children.get(&pid).into_iter().flatten() {
                    stack.push((depth + 1, *child));
                }
            }
            tree.sort();
            tree
        })
        .collect()
}

/// The CPU time (user + system) of a process so far, in clock ticks.
fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let fields: Vec<&str> = stat[stat.rfind(')').unwrap() + 2..].split(' ').collect();
    // `state` is field 3 of stat, so utime (14) and stime (15) are at 11 and 12 here.
    fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap()
}

/// The CPU the daemon and the runs' processes use over [`QUIET`] while nothing is sent, in
/// percent of one core (clock ticks of 10 ms: a resolution of 0.2 % over 5 s).
async fn quiet_cpu(daemon: u32, runs: &[u32]) -> (f64, f64) {
    let ticks = nix::unistd::sysconf(nix::unistd::SysconfVar::CLK_TCK)
        .unwrap()
        .unwrap() as f64;
    let runs_ticks = || runs.iter().map(|p| cpu_ticks(*p)).sum::<u64>();
    let (d0, r0) = (cpu_ticks(daemon), runs_ticks());
    tokio::time::sleep(QUIET).await;
    let (d1, r1) = (cpu_ticks(daemon), runs_ticks());
    let percent = |t: u64| t as f64 / ticks / QUIET.as_secs_f64() * 100.0;
    (percent(d1 - d0), percent(r1 - r0))
}

/// A process's RSS, PSS, threads and open descriptors.
fn costs(pid: u32) -> Costs {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let field = |text: &str, name: &str| -> u64 {
        text.lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap_or_else(|| panic!("no {name} for process {pid}"))
    };
    let rollup = std::fs::read_to_string(format!("/proc/{pid}/smaps_rollup")).unwrap();
    Costs {
        rss_kib: field(&status, "VmRSS:"),
        pss_kib: field(&rollup, "Pss:"),
        threads: field(&status, "Threads:"),
        fds: std::fs::read_dir(format!("/proc/{pid}/fd"))
            .unwrap()
            .count() as u64,
    }
}

fn median<T: Copy + Ord>(values: &[T]) -> T {
    let mut sorted = values.to_vec();
    sorted.sort();
    sorted[sorted.len() / 2]
}

fn median_costs(all: &[Costs]) -> Costs {
    let pick = |f: fn(&Costs) -> u64| median(&all.iter().map(f).collect::<Vec<_>>());
    Costs {
        rss_kib: pick(|c| c.rss_kib),
        pss_kib: pick(|c| c.pss_kib),
        threads: pick(|c| c.threads),
        fds: pick(|c| c.fds),
    }
}

fn percentile(samples: &[Duration], p: f64) -> Duration {
    let mut sorted = samples.to_vec();
    sorted.sort();
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn mib(kib: f64) -> f64 {
    kib / 1024.0
}

/// The figures of one size of one repetition, by name, in print order.
fn figures(rep: &Repetition, at: &AtSize, size: usize) -> Vec<(String, f64)> {
    let (idle, idle_acks) = (&rep.idle, &at.idle_acks);
    let n = size as f64;
    let ctl = &at.controller;
    let increment = |now: u64, before: u64| (now as f64 - before as f64) / n;
    let mut f = vec![
        ("controller RSS (MiB)".to_owned(), mib(ctl.rss_kib as f64)),
        ("controller PSS (MiB)".to_owned(), mib(ctl.pss_kib as f64)),
        (
            "controller RSS per run (MiB)".to_owned(),
            mib(increment(ctl.rss_kib, idle.rss_kib)),
        ),
        ("controller fds".to_owned(), ctl.fds as f64),
        (
            "controller fds per run".to_owned(),
            increment(ctl.fds, idle.fds),
        ),
        ("controller threads".to_owned(), ctl.threads as f64),
        (
            "before runs: ack p99, other daemon / idle one".to_owned(),
            ms(percentile(&rep.before_runs_acks, 99.0)) / ms(percentile(&rep.idle_acks, 99.0)),
        ),
        (
            "controller CPU, quiet, idle daemon (%)".to_owned(),
            rep.idle_cpu,
        ),
        ("controller CPU, quiet (%)".to_owned(), at.quiet_cpu.0),
        ("all runs' CPU, quiet (%)".to_owned(), at.quiet_cpu.1),
    ];
    for (role, c) in ROLES.iter().zip(&at.per_role) {
        f.push((format!("{role}: RSS (MiB)"), mib(c.rss_kib as f64)));
        f.push((format!("{role}: PSS (MiB)"), mib(c.pss_kib as f64)));
        f.push((format!("{role}: threads"), c.threads as f64));
        f.push((format!("{role}: fds"), c.fds as f64));
    }
    let run = &at.per_run;
    f.push(("run processes".to_owned(), at.processes_per_run as f64));
    f.push((
        "run: RSS, all processes (MiB)".to_owned(),
        mib(run.rss_kib as f64),
    ));
    f.push((
        "run: PSS, all processes (MiB)".to_owned(),
        mib(run.pss_kib as f64),
    ));
    f.push(("run: threads".to_owned(), run.threads as f64));
    f.push(("run: fds".to_owned(), run.fds as f64));
    f.push((
        "per waiting run: PSS + controller RSS increment (MiB)".to_owned(),
        mib(run.pss_kib as f64 + increment(ctl.rss_kib, idle.rss_kib)),
    ));
    f.push((
        "per waiting run: RSS + controller RSS increment (MiB)".to_owned(),
        mib(run.rss_kib as f64 + increment(ctl.rss_kib, idle.rss_kib)),
    ));
    f.push((
        "ack p50, idle daemon (ms)".to_owned(),
        ms(percentile(idle_acks, 50.0)),
    ));
    f.push((
        "ack p99, idle daemon (ms)".to_owned(),
        ms(percentile(idle_acks, 99.0)),
    ));
    f.push((
        "ack p50, loaded (ms)".to_owned(),
        ms(percentile(&at.acks, 50.0)),
    ));
    f.push((
        "ack p99, loaded (ms)".to_owned(),
        ms(percentile(&at.acks, 99.0)),
    ));
    f.push((
        "ack p99, loaded / idle daemon".to_owned(),
        ms(percentile(&at.acks, 99.0)) / ms(percentile(idle_acks, 99.0)),
    ));
    f
}

fn print_repetition(index: usize, rep: &Repetition) {
    println!(
        "repetition {}: controller idle: RSS {:.1} MiB, PSS {:.1} MiB, {} fds, {} threads; ack idle p50 {:.2} ms p99 {:.2} ms",
        index + 1,
        mib(rep.idle.rss_kib as f64),
        mib(rep.idle.pss_kib as f64),
        rep.idle.fds,
        rep.idle.threads,
        ms(percentile(&rep.idle_acks, 50.0)),
        ms(percentile(&rep.idle_acks, 99.0)),
    );
    for (size, at) in SIZES.iter().zip(&rep.sizes) {
        let line: Vec<String> = figures(rep, at, *size)
            .into_iter()
            .map(|(name, value)| format!("{name}={value:.2}"))
            .collect();
        println!("  {size} runs: {}", line.join("; "));
        // Where in the phase the slow acks fall (seconds from its start), to tell a stall
        // from a steady cost.
        let slow = ms(percentile(&at.idle_acks, 99.0)) * 1.5;
        let late: Vec<String> = at
            .acks
            .iter()
            .enumerate()
            .filter(|(_, a)| ms(**a) > slow)
            .map(|(i, a)| format!("{:.2}s:{:.0}ms", i as f64 / RATE as f64, ms(*a)))
            .collect();
        println!(
            "  {size} runs: {} acks over 1.5 × the idle p99: {}",
            late.len(),
            late.join(" ")
        );
    }
}

fn print_medians(reps: &[Repetition]) {
    println!(
        "\nwaiting runs benchmark: medians of {} repetitions (ack: {PROBES} user messages at {RATE}/s per phase)",
        reps.len()
    );
    let idle: Vec<Costs> = reps.iter().map(|r| r.idle).collect();
    let idle = median_costs(&idle);
    println!(
        "{:<56} {:>10.2}\n{:<56} {:>10.2}\n{:<56} {:>10}\n{:<56} {:>10}",
        "controller idle RSS (MiB)",
        mib(idle.rss_kib as f64),
        "controller idle PSS (MiB)",
        mib(idle.pss_kib as f64),
        "controller idle fds",
        idle.fds,
        "controller idle threads",
        idle.threads
    );
    print!("{:<56}", "");
    for size in SIZES {
        print!(" {:>10}", format!("{size} runs"));
    }
    println!();
    let per_size: Vec<Vec<Vec<(String, f64)>>> = SIZES
        .iter()
        .enumerate()
        .map(|(s, size)| {
            reps.iter()
                .map(|r| figures(r, &r.sizes[s], *size))
                .collect()
        })
        .collect();
    let names: Vec<String> = per_size[0][0].iter().map(|(n, _)| n.clone()).collect();
    for (k, name) in names.iter().enumerate() {
        print!("{name:<56}");
        for size in &per_size {
            let mut values: Vec<f64> = size.iter().map(|figs| figs[k].1).collect();
            values.sort_by(f64::total_cmp);
            print!(" {:>10.2}", values[values.len() / 2]);
        }
        println!();
    }
}
