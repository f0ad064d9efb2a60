//! Several hosts on one PostgreSQL store: three `codebutler` processes, each with its own
//! checkouts of two repositories (a "host" each: its own global config directory), on one
//! Slack app and one database. Thirty questions in six threads across both repositories
//! while the instance holding a thread is SIGKILLed and started again, at random (seeded):
//! every question is answered exactly once, each thread's answers come in the order of its
//! questions, and the killed instances' threads are taken over by the others.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use codebutler_test_support::git;
use codebutler_test_support::model::{FakeModel, Reply};
use codebutler_test_support::postgres;
use codebutler_test_support::slack::{self, FakeSlack};
use serde_json::json;
use tempfile::TempDir;

use crate::harness::{CODER_MODEL, Daemon, PM_MODEL, USER, codebutler_command};

const CHANNELS: [(&str, &str); 2] = [("api", "C0API"), ("web", "C0WEB")];
const THREADS_PER_CHANNEL: usize = 3;
const ROUNDS: usize = 5;
/// Long enough for a few lease takeovers (15 s each) on a loaded machine.
const DEADLINE: Duration = Duration::from_secs(240);
/// How long a round waits for a live instance to hold a lease: past the lease's 15 s expiry.
const TAKEOVER_WAIT: Duration = Duration::from_secs(40);

/// SplitMix64: small and seeded, so a failing run replays with its seed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// One host: its global config directory and its own checkouts of both repositories.
pub(crate) struct Host {
    home: TempDir,
    repos: TempDir,
}

impl Host {
    /// A host serving both repositories (`CHANNELS`), each a fresh repository of its own.
    pub(crate) fn new(slack: &FakeSlack, model: &FakeModel, gh: &Path, store_url: &str) -> Host {
        Host::serving(slack, model, gh, store_url, &CHANNELS, None, json!({}))
    }

    /// A host serving `repositories` (name, channel): clones of `origins/<name>.git` when
    /// `origins` is given, else fresh repositories; `extra` is merged into its global config.
    fn serving(
        slack: &FakeSlack,
        model: &FakeModel,
        gh: &Path,
        store_url: &str,
        repositories: &[(&str, &str)],
        origins: Option<&Path>,
        extra: serde_json::Value,
    ) -> Host {
        let host = Host {
            home: tempfile::tempdir().unwrap(),
            repos: tempfile::tempdir().unwrap(),
        };
        let mut entries = Vec::new();
        for (name, channel) in repositories {
            let path = host.repos.path().canonicalize().unwrap().join(name);
            match origins {
                Some(origins) => clone(&origins.join(format!("{name}.git")), &path),
                None => make_repo(&path, name),
            }
            entries.push(json!({"name": name, "path": path, "channel": channel}));
        }
        // The provider carries the PM's model named below and the Coder's default one.
        model.list(PM_MODEL);
        model.list(CODER_MODEL);
        let mut global = json!({
            "slack": {
                "botToken": slack::BOT_TOKEN,
                "appToken": slack::APP_TOKEN,
                "apiUrl": slack.api_url(),
                "messagesPerSecond": 100.0,
                // Answers posted whole, as the harness has them (see tests/README.md).
                "streaming": false
            },
            "openrouter": {"apiKey": "sk-or-test-key", "baseUrl": model.base_url(), "maxRetries": 2, "timeoutSeconds": 20},
            "productManager": {"default": "cheap", "models": {"cheap": {"model": PM_MODEL}}},
            "github": {"cli": gh.display().to_string()},
            "store": {"url": store_url},
            "repositories": entries
        });
        codebutler_test_support::merge(&mut global, extra);
        std::fs::write(host.home.path().join("config.json"), global.to_string()).unwrap();
        host
    }

    pub(crate) fn spawn(&self, logs: &Path, n: usize) -> Daemon {
        let mut cmd = codebutler_command(self.home.path());
        cmd.current_dir(self.repos.path());
        Daemon::spawn_logged(cmd, logs.join(format!("instance-{n}.log")))
    }
}

/// `git clone` of `origin` into `path`.
fn clone(origin: &Path, path: &Path) {
    let out = Command::new("git")
        .arg("clone")
        .arg("-q")
        .arg(origin)
        .arg(path)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn make_repo(root: &Path, name: &str) {
    git::write_files(root, &[("README.md", &format!("# {name}\n"))]);
    let repo = git::init(root);
    git::commit_paths(&repo, &["README.md"], "Initial commit");
}

/// Every `QTOKEN-<n>` in `text`, in order.
fn tokens(text: &str) -> Vec<String> {
    text.match_indices("QTOKEN-")
        .filter_map(|(at, _)| {
            let rest = &text[at + "QTOKEN-".len()..];
            let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
            (!digits.is_empty()).then(|| format!("QTOKEN-{digits}"))
        })
        .collect()
}

/// The tokens of the questions a PM request answers: those of the user messages after the
/// conversation's last answer (questions typed while the PM thinks join its turn, and its
/// one answer addresses them all).
fn asked_now(body: &serde_json::Value) -> Vec<String> {
    let messages = body["messages"].as_array().cloned().unwrap_or_default();
    let since = messages
        .iter()
        .rposition(|m| m["role"] == "assistant")
        .map_or(0, |i| i + 1);
    messages[since..]
        .iter()
        .filter(|m| m["role"] == "user")
        .flat_map(|m| tokens(&crate::harness::content_text(&m["content"])))
        .collect()
}

/// The owners of the thread leases, from every repository's schema.
fn lease_owners(cluster: &postgres::PgCluster, database: &str) -> Vec<String> {
    CHANNELS
        .iter()
        .flat_map(|(name, _)| lease_owners_of(cluster, database, name))
        .collect()
}

/// The owners of the thread leases in repository `name`'s schema.
fn lease_owners_of(cluster: &postgres::PgCluster, database: &str, name: &str) -> Vec<String> {
    let out = cluster.psql(
        database,
        &format!(
            "SELECT owner FROM codebutler_{name}.thread_leases \
             WHERE thread_ts <> 'pr-watcher' ORDER BY owner"
        ),
    );
    out.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(String::from)
        .collect()
}

/// An instance id is `<host>:<pid>:<start ms>`.
fn pid_of(owner: &str) -> Option<i32> {
    owner.split(':').nth(1)?.parse().ok()
}

#[tokio::test]
async fn three_instances_on_one_store_answer_every_question_once_in_order_through_kills() {
    let seed = std::env::var("HOSTS_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos() as u64
        });
    println!("hosts seed: {seed} (replay: HOSTS_SEED={seed})");
    let mut rng = Rng(seed);

    let cluster = postgres::shared();
    let database = cluster.create_database("hosts");
    let url = cluster.url(&database);
    let slack = FakeSlack::start().await;
    // An event sent to an instance killed before it stored and acknowledged it comes back,
    // as Slack retries an unacknowledged event; the instances deduplicate the retries.
    slack.retry_unacked(Duration::from_secs(3));
    let model = FakeModel::start().await;
    // Every PM turn is answered by naming the tokens of its questions (those typed while
    // the PM thinks join its turn), however often it is asked.
    model.respond("", |body| {
        let asked = asked_now(body);
        if asked.is_empty() {
            Reply::text("No token.")
        } else {
            Reply::text(format!("Answer to {}.", asked.join(" and ")))
        }
    });
    let outside = tempfile::tempdir().unwrap();
    codebutler_test_support::gh::install_fake_gh(outside.path());
    let gh = outside.path().join("gh");
    let hosts: Vec<Host> = (0..3)
        .map(|_| Host::new(&slack, &model, &gh, &url))
        .collect();
    let logs = outside.path();
    let mut spawned = 0;
    let mut daemons: Vec<Daemon> = hosts
        .iter()
        .map(|h| {
            spawned += 1;
            h.spawn(logs, spawned)
        })
        .collect();
    assert!(
        slack
            .wait_until(Duration::from_secs(60), || slack.open_connections() >= 3)
            .await,
        "three instances did not connect"
    );

    // Six threads, opened with their first question; then four more rounds.
    let mut threads: Vec<(&str, String, Vec<String>)> = Vec::new();
    let mut n = 0;
    for (_, channel) in CHANNELS {
        for _ in 0..THREADS_PER_CHANNEL {
            n += 1;
            let question = format!("What about QTOKEN-{n}?");
            let ts = slack.user_message(channel, USER, &question, None).ts;
            threads.push((channel, ts, vec![format!("QTOKEN-{n}")]));
        }
    }
    let mut kills = 0;
    let mut killed_owners = Vec::new();
    for _round in 1..ROUNDS {
        // Let the round's questions reach their owners, then kill the owner of a thread.
        // Only a live instance's lease counts: a killed instance keeps its leases until they
        // expire, and when it held every thread no live owner exists until they are taken over.
        tokio::time::sleep(Duration::from_millis(300 + rng.below(700) as u64)).await;
        let pids: Vec<i32> = daemons.iter().map(Daemon::pid).collect();
        let live_owners = || async {
            // `psql` blocks: off this runtime, which also serves the fakes.
            let database = database.clone();
            tokio::task::spawn_blocking(move || lease_owners(cluster, &database))
                .await
                .unwrap()
                .into_iter()
                .filter_map(|owner| {
                    let i = pids.iter().position(|&pid| Some(pid) == pid_of(&owner))?;
                    Some((i, owner))
                })
                .collect::<Vec<_>>()
        };
        let mut owners = live_owners().await;
        let waited_since = std::time::Instant::now();
        while owners.is_empty() && waited_since.elapsed() < TAKEOVER_WAIT {
            tokio::time::sleep(Duration::from_millis(250)).await;
            owners = live_owners().await;
        }
        if !owners.is_empty() {
            let (i, owner) = owners[rng.below(owners.len())].clone();
            daemons[i].kill9().await;
            kills += 1;
            killed_owners.push(owner);
            spawned += 1;
            daemons[i] = hosts[i].spawn(logs, spawned);
        }
        for (channel, ts, asked) in &mut threads {
            n += 1;
            let question = format!("And QTOKEN-{n}?");
            slack.user_message(channel, USER, &question, Some(ts));
            asked.push(format!("QTOKEN-{n}"));
        }
    }
    assert_eq!(n, 30);
    assert!(
        kills == ROUNDS - 1,
        "only {kills} kill(s): no live instance held a lease within {TAKEOVER_WAIT:?}"
    );

    let answers = |channel: &str, ts: &str| -> Vec<String> {
        slack
            .posts()
            .into_iter()
            .filter(|p| p.channel == channel && p.thread_ts.as_deref() == Some(ts))
            .flat_map(|p| tokens(&p.text))
            .collect()
    };
    let all_answered = slack
        .wait_until(DEADLINE, || {
            threads
                .iter()
                .all(|(channel, ts, asked)| answers(channel, ts).len() >= asked.len())
        })
        .await;
    // Every instance's log, the killed ones' included, in the order they started.
    let logs_text = || {
        (1..=spawned)
            .map(|n| {
                let log = std::fs::read_to_string(logs.join(format!("instance-{n}.log")))
                    .unwrap_or_else(|e| format!("(unreadable: {e})"));
                format!("instance {n}:\n{log}")
            })
            .collect::<Vec<_>>()
            .join("\n---\n")
    };
    let missing: Vec<String> = threads
        .iter()
        .filter_map(|(channel, ts, asked)| {
            let got = answers(channel, ts);
            (got.len() < asked.len())
                .then(|| format!("{channel}/{ts}: asked {asked:?}, answered {got:?}"))
        })
        .collect();
    assert!(
        all_answered,
        "not every question was answered; seed {seed}; {missing:#?}; logs:\n{}",
        logs_text()
    );
    // Nothing late arrives twice.
    tokio::time::sleep(Duration::from_secs(2)).await;
    for (channel, ts, asked) in &threads {
        assert_eq!(
            &answers(channel, ts),
            asked,
            "thread {ts} in {channel}: each question answered once, in order (seed {seed})"
        );
    }
    // Only a thread's owner asks the model: a question is asked again only when its owner
    // was killed while asking (at most once per thread it held). Instances that ignored
    // the leases asked about twice as often here, each answer fenced off but one.
    let requests = model.requests().len();
    println!("model requests: {requests} for {n} questions and {kills} kills");
    assert!(
        requests <= n + kills * threads.len(),
        "{requests} model requests for {n} questions and {kills} kills"
    );
    // Each killed owner's threads went to another instance.
    let owners = lease_owners(cluster, &database);
    for killed in &killed_owners {
        assert!(
            !owners.contains(killed),
            "a killed instance still holds a lease: {killed}; leases {owners:?}"
        );
    }
    // `--status` on any host shows the three live instances and who holds which thread.
    let status = codebutler_command(hosts[0].home.path())
        .arg("--status")
        .current_dir(hosts[0].repos.path())
        .output()
        .unwrap();
    let status = String::from_utf8_lossy(&status.stdout).into_owned();
    assert!(status.contains("hosts: 3"), "{status}");
    for daemon in &daemons {
        assert!(status.contains(&format!(":{}:", daemon.pid())), "{status}");
    }
    assert!(
        status.contains("postgres schema codebutler_api"),
        "{status}"
    );
    // Every thread's lease, under its holder.
    let hosts_part = &status[status.find("hosts: 3").unwrap_or(0)..];
    assert_eq!(
        hosts_part.matches("api/").count() + hosts_part.matches("web/").count(),
        lease_owners(cluster, &database).len(),
        "{status}"
    );

    // Every thread was taken once at first, and again after each kill of its owner.
    let took: usize = std::fs::read_dir(logs)
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with("instance-"))
        .map(|e| {
            std::fs::read_to_string(e.path())
                .unwrap_or_default()
                .matches("this instance takes the thread")
                .count()
        })
        .sum();
    assert!(
        took >= threads.len() + kills,
        "{took} takes for {} threads and {kills} kills; logs:\n{}",
        threads.len(),
        logs_text()
    );
}

/// A Coder run whose instance is SIGKILLed mid-run: once its lease expires, the other
/// instance takes the thread, marks the run interrupted and says so in the thread, once.
#[tokio::test]
async fn a_run_whose_instance_dies_is_reported_by_the_instance_that_takes_its_thread() {
    let cluster = postgres::shared();
    let database = cluster.create_database("hostrun");
    let url = cluster.url(&database);
    let slack = FakeSlack::start().await;
    let model = FakeModel::start().await;
    let outside = tempfile::tempdir().unwrap();
    codebutler_test_support::gh::install_fake_gh(outside.path());
    let gh = outside.path().join("gh");
    let origins = outside.path().join("origins");
    let seed = outside.path().join("seed");
    make_repo(&seed, "api");
    git::push_to_new_origin(&seed, &origins.join("api.git"));
    let runs = json!({
        "sandbox": {"runnerPath": crate::harness::runner_bin().display().to_string(), "memoryMB": 768},
        "coder": {"maxTurns": 6, "timeout": 5}
    });
    let repos = [("api", "C0API")];
    let hosts: Vec<Host> = (0..2)
        .map(|_| {
            Host::serving(
                &slack,
                &model,
                &gh,
                &url,
                &repos,
                Some(&origins),
                runs.clone(),
            )
        })
        .collect();
    let ask = "please add the notes HOSTRUN-ASK";
    let plan = json!({"summary": "Work on HOSTRUN-TOKEN", "steps": ["Do it"], "files": []});
    model.script(
        ask,
        vec![
            Reply::tool_call("ProposePlan", plan.to_string()),
            Reply::text("Plan ready."),
        ],
    );
    // The Coder's first call takes long: the run is in progress when its instance dies.
    model.script(
        "HOSTRUN-TOKEN",
        vec![Reply::delayed(
            Duration::from_secs(120),
            Reply::text("Done."),
        )],
    );
    let mut first = hosts[0].spawn(outside.path(), 1);
    assert!(
        slack
            .wait_until(Duration::from_secs(60), || slack.open_connections() >= 1)
            .await,
        "the first instance did not connect"
    );
    let thread = slack.user_message("C0API", USER, ask, None).ts;
    let posts_in = || {
        slack
            .posts()
            .into_iter()
            .filter(|p| p.thread_ts.as_deref() == Some(thread.as_str()))
            .map(|p| p.text)
            .collect::<Vec<_>>()
    };
    assert!(
        slack
            .wait_until(crate::harness::WAIT, || !posts_in().is_empty())
            .await,
        "no plan; log:\n{}",
        first.log()
    );
    let second = hosts[1].spawn(outside.path(), 2);
    assert!(
        slack
            .wait_until(Duration::from_secs(60), || slack.open_connections() >= 2)
            .await,
        "the second instance did not connect"
    );
    slack.user_message("C0API", USER, "yes", Some(&thread));
    let running = || {
        cluster.psql(
            &database,
            "SELECT state || ' ' || instance FROM codebutler_api.runs",
        )
    };
    assert!(
        slack
            .wait_until(crate::harness::WAIT, || running().contains("running"))
            .await,
        "the run did not start: {}; log:\n{}",
        running(),
        first.log()
    );
    let admitted_on = running();
    assert!(
        admitted_on.contains(&format!(":{}:", first.pid())),
        "the run was admitted on the instance that owns its thread: {admitted_on}"
    );
    first.kill9().await;

    let interrupted = "I was stopped while working on this";
    let reported = slack
        .wait_until(Duration::from_secs(60), || {
            posts_in().iter().any(|p| p.contains(interrupted))
        })
        .await;
    assert!(
        reported,
        "the run was not reported; posts {:?}; log:\n{}",
        posts_in(),
        second.log()
    );
    tokio::time::sleep(Duration::from_secs(2)).await;
    let reports = posts_in()
        .iter()
        .filter(|p| p.contains(interrupted))
        .count();
    assert_eq!(reports, 1, "{:?}", posts_in());
    assert!(running().starts_with("interrupted"), "{}", running());
    let owners = lease_owners_of(cluster, &database, "api");
    assert_eq!(
        owners.iter().map(|o| pid_of(o)).collect::<Vec<_>>(),
        [Some(second.pid())],
        "the thread's lease is the second instance's"
    );
}
