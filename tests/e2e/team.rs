//! One CodeButler for a team: one `codebutler` serving two repositories in two channels of
//! one Slack app (the global config's `repositories`), each answering from its own prompt,
//! memory and store; an unserved channel acknowledged and ignored; a direct message asking
//! which repository once and remembering the answer across a restart; one service per Slack
//! app, on this host (a lock) and across hosts (Slack's connection count); `--status`.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use codebutler_test_support::git;
use codebutler_test_support::model::{FakeModel, Reply};
use codebutler_test_support::slack::{self, FakeSlack};
use serde_json::{Value, json};
use tempfile::TempDir;

use crate::harness::{CODER_MODEL, Daemon, PM_MODEL, USER, WAIT, codebutler_command, content_text};

const API: &str = "C0API";
const WEB: &str = "C0WEB";
const EXTRA: &str = "C0EXTRA";

/// The fakes, a global config directory listing two repositories (`api`, with its channel
/// in its entry, and `web`, with its channel in its own config), and a third repository
/// (`extra`) no entry lists.
pub(crate) struct Team {
    pub(crate) slack: FakeSlack,
    pub(crate) model: FakeModel,
    home: TempDir,
    outside: TempDir,
    _repos: TempDir,
    api: PathBuf,
    web: PathBuf,
    extra: PathBuf,
}

impl Team {
    pub(crate) async fn new() -> Team {
        let repos = tempfile::tempdir().unwrap();
        let root = repos.path().canonicalize().unwrap();
        let team = Team {
            slack: FakeSlack::start().await,
            model: FakeModel::start().await,
            home: tempfile::tempdir().unwrap(),
            outside: tempfile::tempdir().unwrap(),
            api: root.join("api"),
            web: root.join("web"),
            extra: root.join("extra"),
            _repos: repos,
        };
        for (dir, name) in [
            (&team.api, "API"),
            (&team.web, "WEB"),
            (&team.extra, "EXTRA"),
        ] {
            make_repo(dir, name);
        }
        codebutler_test_support::gh::install_fake_gh(team.outside.path());
        // The provider carries the PM's model the global config names and the Coder's
        // default one.
        team.model.list(PM_MODEL);
        team.model.list(CODER_MODEL);
        write_json(
            &team.web.join(".codebutler/config.json"),
            &json!({"slack": {"channelID": WEB}}),
        );
        write_json(
            &team.extra.join(".codebutler/config.json"),
            &json!({"slack": {"channelID": EXTRA}}),
        );
        let global = team.global(json!([
            {"path": team.api, "channel": API},
            {"path": team.web},
        ]));
        write_json(&team.home.path().join("config.json"), &global);
        team
    }

    /// The global config: the one Slack app, the model, and `repositories`.
    fn global(&self, repositories: Value) -> Value {
        json!({
            "slack": {
                "botToken": slack::BOT_TOKEN,
                "appToken": slack::APP_TOKEN,
                "apiUrl": self.slack.api_url(),
                "messagesPerSecond": 100.0,
                // Answers posted whole, as the harness has them (see tests/README.md).
                "streaming": false
            },
            "openrouter": {"apiKey": "sk-or-test-key", "baseUrl": self.model.base_url(), "maxRetries": 2, "timeoutSeconds": 20},
            "productManager": {"default": "cheap", "models": {"cheap": {"model": PM_MODEL}}},
            "github": {"cli": self.outside.path().join("gh").display().to_string()},
            "repositories": repositories
        })
    }

    /// `codebutler` with the global config directory `home`, a clean environment apart from
    /// PATH, and `args`.
    fn command(&self, home: &Path, args: &[&str]) -> Command {
        let mut cmd = codebutler_command(home);
        cmd.args(args).current_dir(self.outside.path());
        cmd
    }

    fn spawn(&self, home: &Path, args: &[&str]) -> Daemon {
        let log = self.outside.path().join(format!(
            "codebutler-{}.log",
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos()
        ));
        Daemon::spawn_logged(self.command(home, args), log)
    }

    /// Starts the service for the listed repositories and waits until it has connected.
    pub(crate) async fn start(&self) -> Daemon {
        let opened = self.slack.connections_opened();
        let daemon = self.spawn(self.home.path(), &[]);
        let connected = self
            .slack
            .wait_until(WAIT, || {
                self.slack.connections_opened() > opened && self.slack.open_connections() > 0
            })
            .await;
        assert!(connected, "service did not connect; log:\n{}", daemon.log());
        daemon
    }

    /// Stops `service` with SIGTERM and checks it exited cleanly.
    pub(crate) async fn stop(service: &mut Daemon) {
        service.signal("TERM");
        assert_eq!(
            service.wait_exit(WAIT).await.code(),
            Some(0),
            "{}",
            service.log()
        );
    }

    /// Checks Slack saw no call break its rules.
    pub(crate) fn assert_slack_clean(&self) {
        assert!(
            self.slack.violations().is_empty(),
            "{:?}",
            self.slack.violations()
        );
    }

    /// Asks `question` in `channel` and returns the texts of the bot's answer.
    pub(crate) async fn ask(
        &self,
        channel: &str,
        question: &str,
        answer: &str,
    ) -> (String, Vec<String>) {
        self.model.script(question, vec![Reply::text(answer)]);
        let thread = self.slack.user_message(channel, USER, question, None).ts;
        let ok = self
            .slack
            .wait_until(WAIT, || !self.posts_in(channel, &thread).is_empty())
            .await;
        assert!(ok, "no answer to {question:?} in {channel}");
        let posts = self.posts_in(channel, &thread);
        (thread, posts)
    }

    pub(crate) fn posts_in(&self, channel: &str, thread: &str) -> Vec<String> {
        self.slack
            .posts()
            .into_iter()
            .filter(|p| p.channel == channel && p.thread_ts.as_deref() == Some(thread))
            .map(|p| p.text)
            .collect()
    }

    /// `codebutler --status` with the team's global config: exit code and stdout.
    async fn status(&self) -> (Option<i32>, String) {
        let out = tokio::process::Command::from(self.command(self.home.path(), &["--status"]))
            .output()
            .await
            .unwrap();
        assert!(
            out.stderr.is_empty() || out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
        )
    }
}

/// A repository whose committed README and PM memory and whose PM prompt carry `name`.
fn make_repo(root: &Path, name: &str) {
    git::write_files(
        root,
        &[
            ("README.md", &format!("# {name}\n")),
            (
                ".codebutler/memory/pm.md",
                &format!("# Memory\n\n- MEMORY-{name}: learned in the {name} repository.\n"),
            ),
        ],
    );
    let repo = git::init(root);
    git::commit_paths(
        &repo,
        &["README.md", ".codebutler/memory"],
        "Initial commit",
    );
    git::write_files(
        root,
        &[(
            ".codebutler/prompts/pm.md",
            &format!("You are the PM of the {name} repository. PROMPT-{name}.\n"),
        )],
    );
}

fn write_json(path: &Path, value: &Value) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, value.to_string()).unwrap();
}

/// The system prompt of the first model request for `question`.
pub(crate) fn system_prompt(model: &FakeModel, question: &str) -> String {
    let requests = model.requests_for(question);
    assert!(!requests.is_empty(), "no model request for {question:?}");
    content_text(&requests[0].body["messages"][0]["content"])
}

/// Every `(table, channel_id, thread_ts)` row of the threads and messages of a stopped
/// repository's store.
async fn stored_threads(repo: &Path) -> Vec<(String, String, String)> {
    let options = sqlx::sqlite::SqliteConnectOptions::new()
        .filename(repo.join(".codebutler/store.db"))
        .busy_timeout(Duration::from_secs(5));
    let pool = sqlx::sqlite::SqlitePoolOptions::new()
        .max_connections(1)
        .connect_with(options)
        .await
        .unwrap();
    let rows: Vec<(String, String, String)> = sqlx::query_as(
        "SELECT 'threads', channel_id, thread_ts FROM threads \
         UNION ALL SELECT 'messages', channel_id, thread_ts FROM messages ORDER BY 1",
    )
    .fetch_all(&pool)
    .await
    .unwrap();
    pool.close().await;
    rows
}

#[tokio::test]
async fn one_service_answers_each_channel_from_its_own_repository() {
    let team = Team::new().await;
    let mut service = team.start().await;
    let (api_thread, api_posts) = team
        .ask(API, "how do we deploy the api?", "With the API pipeline.")
        .await;
    let (web_thread, web_posts) = team
        .ask(
            WEB,
            "how do we deploy the web app?",
            "With the web pipeline.",
        )
        .await;
    assert_eq!(api_posts, ["*PM:* With the API pipeline."]);
    assert_eq!(web_posts, ["*PM:* With the web pipeline."]);

    // Each question reached the model with its own repository's PM prompt and memory only.
    let api = system_prompt(&team.model, "how do we deploy the api?");
    let web = system_prompt(&team.model, "how do we deploy the web app?");
    for (prompt, own, other) in [(&api, "API", "WEB"), (&web, "WEB", "API")] {
        assert!(
            prompt.starts_with(&format!(
                "You are the PM of the {own} repository. PROMPT-{own}."
            )),
            "{prompt}"
        );
        assert!(prompt.contains(&format!("MEMORY-{own}")), "{prompt}");
        assert!(!prompt.contains(other), "{own} saw {other}: {prompt}");
    }
    // One app, one Socket Mode connection for both repositories.
    assert_eq!(team.slack.connections_opened(), 1);
    let log = service.log();
    assert!(log.contains("api: listening in channel C0API"), "{log}");
    assert!(log.contains("web: listening in channel C0WEB"), "{log}");

    Team::stop(&mut service).await;
    // Each repository's store holds its own thread, and nothing of the other's.
    let t = |table: &str, channel: &str, ts: &str| (table.into(), channel.into(), ts.to_owned());
    assert_eq!(
        stored_threads(&team.api).await,
        [
            t("messages", API, &api_thread),
            t("threads", API, &api_thread)
        ]
    );
    assert_eq!(
        stored_threads(&team.web).await,
        [
            t("messages", WEB, &web_thread),
            t("threads", WEB, &web_thread)
        ]
    );
}

#[tokio::test]
async fn an_event_in_a_channel_no_repository_serves_is_acked_and_ignored() {
    let team = Team::new().await;
    let mut service = team.start().await;
    let sent = team
        .slack
        .user_message(EXTRA, USER, "is anyone serving this channel?", None);
    assert!(team.slack.wait_acked(&sent.envelope_id, WAIT).await);
    // A question after it is answered, so the ignored event was handled before it.
    team.ask(API, "still there?", "Yes.").await;
    assert!(team.posts_in(EXTRA, &sent.ts).is_empty());
    assert!(
        team.model
            .requests_for("is anyone serving this channel?")
            .is_empty()
    );
    Team::stop(&mut service).await;
    for repo in [&team.api, &team.web] {
        let rows = stored_threads(repo).await;
        assert!(
            rows.iter().all(|(_, channel, _)| channel != EXTRA),
            "{rows:?}"
        );
    }
    team.assert_slack_clean();
}

/// Among several repositories, one whose channel the bot is not in does not stop the others:
/// it is said once in the log, naming the repository, the channel and the invitation to
/// make, and the other repository answers. Once the bot is invited, that channel is served
/// too, without a restart.
#[tokio::test]
async fn a_channel_the_bot_is_not_in_is_said_once_and_the_others_are_served() {
    let team = Team::new().await;
    team.slack.name_channel(WEB, "web-team");
    team.slack.remove_bot_from(WEB);
    let mut service = team.start().await;
    let (_, posts) = team
        .ask(API, "how do we deploy the api?", "With make.")
        .await;
    assert_eq!(posts.len(), 1, "{posts:?}");
    let log = service.log();
    let said: Vec<&str> = log.lines().filter(|l| l.contains("#web-team")).collect();
    assert_eq!(said.len(), 1, "said once:\n{log}");
    for needle in [
        "repository `web`",
        "not in #web-team (C0WEB)",
        "/invite @codebutler",
    ] {
        assert!(said[0].contains(needle), "{needle:?} in:\n{log}");
    }
    // Invited, the bot gets the channel's messages, and the repository answers them.
    team.slack.invite_bot_to(WEB);
    team.ask(WEB, "how do we deploy the web app?", "With npm.")
        .await;
    Team::stop(&mut service).await;
}

#[tokio::test]
async fn a_second_codebutler_on_the_same_slack_app_on_this_host_is_refused() {
    let team = Team::new().await;
    let first = team.start().await;
    // Another repository, run on its own with --repo, but with the same app token.
    let extra = team.extra.display().to_string();
    let mut second = team.spawn(team.home.path(), &["--repo", &extra]);
    assert_eq!(
        second.wait_exit(WAIT).await.code(),
        Some(4),
        "{}",
        second.log()
    );
    let log = second.log();
    assert!(
        log.contains(&format!(
            "codebutler: error: another CodeButler (pid {}) is already connected to this Slack app",
            first.pid()
        )),
        "{log}"
    );
    assert!(
        log.contains("one service per Slack app, since Slack would split the app's events"),
        "{log}"
    );
    // It never connected: the first one still has every event.
    assert_eq!(team.slack.connections_opened(), 1);
    team.ask(API, "are you still the only one?", "I am.").await;
}

#[tokio::test]
async fn another_process_on_the_app_elsewhere_stops_the_newcomer() {
    let team = Team::new().await;
    let _first = team.start().await;
    // Another host: its own global config directory and repository, the same Slack app.
    let elsewhere = tempfile::tempdir().unwrap();
    let mut global = team.global(json!([{"path": team.extra, "channel": EXTRA}]));
    global["slack"]["connectionGraceSeconds"] = json!(1);
    write_json(&elsewhere.path().join("config.json"), &global);
    let mut second = team.spawn(elsewhere.path(), &[]);
    assert_eq!(
        second.wait_exit(WAIT).await.code(),
        Some(4),
        "{}",
        second.log()
    );
    let log = second.log();
    assert!(
        log.contains(
            "codebutler: error: another process is connected to this Slack app: Slack reports 2 \
             Socket Mode connections where this service expects 1, for longer than 1 s."
        ),
        "{log}"
    );
    // The service that was there first goes on answering.
    assert_eq!(
        team.ask(API, "did the newcomer leave?", "It did.").await.1,
        ["*PM:* It did."]
    );
}

#[tokio::test]
async fn a_reconnect_is_not_taken_for_another_process() {
    let team = Team::new().await;
    let mut global = team.global(json!([
        {"path": team.api, "channel": API},
        {"path": team.web},
    ]));
    global["slack"]["connectionGraceSeconds"] = json!(1);
    write_json(&team.home.path().join("config.json"), &global);
    let service = team.start().await;
    for round in 0..3 {
        team.slack.disconnect_all();
        let reconnected = team
            .slack
            .wait_until(WAIT, || {
                team.slack.connections_opened() == round + 2 && team.slack.open_connections() == 1
            })
            .await;
        assert!(reconnected, "{}", service.log());
    }
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(
        team.ask(WEB, "still serving?", "Still here.").await.1,
        ["*PM:* Still here."]
    );
    assert!(
        !service.log().contains("another process"),
        "{}",
        service.log()
    );
}

#[tokio::test]
async fn status_shows_each_repository_its_service_and_its_active_threads() {
    let team = Team::new().await;
    let normalize = |text: &str, pid: Option<i32>| {
        let mut text = text
            .replace(&team.api.display().to_string(), "<api>")
            .replace(&team.web.display().to_string(), "<web>");
        if let Some(pid) = pid {
            text = text.replace(&format!("(pid {pid})"), "(pid <pid>)");
        }
        // The toolchains are this host's (`toolchains.rs` checks what is found).
        if let (Some(start), Some(end)) = (text.find("toolchains: "), text.find("repositories: ")) {
            text.replace_range(start..end, "toolchains: <this host's>\n");
        }
        text
    };
    let (code, stopped) = team.status().await;
    assert_eq!(code, Some(0));
    assert_eq!(
        normalize(&stopped, None),
        "slack app: not running
service: not installed (codebutler --install)
toolchains: <this host's>
repositories: 2

api
  path     <api>
  channel  C0API
  store    sqlite <api>/.codebutler/store.db
  service  not running
  threads  none (no store yet)

web
  path     <web>
  channel  C0WEB
  store    sqlite <web>/.codebutler/store.db
  service  not running
  threads  none (no store yet)

hosts: this one (each store is one host's)
"
    );

    let service = team.start().await;
    let (thread, _) = team.ask(API, "what is this repository?", "The API.").await;
    let (code, running) = team.status().await;
    assert_eq!(code, Some(0));
    assert_eq!(
        normalize(&running, Some(service.pid())).replace(&thread, "<thread>"),
        "slack app: running (pid <pid>)
service: not installed (codebutler --install)
toolchains: <this host's>
repositories: 2

api
  path     <api>
  channel  C0API
  store    sqlite <api>/.codebutler/store.db
  service  running (pid <pid>)
  threads  1 active
    <thread>  conversing
  runs     0 active

web
  path     <web>
  channel  C0WEB
  store    sqlite <web>/.codebutler/store.db
  service  running (pid <pid>)
  threads  0 active
  runs     0 active

hosts: this one (each store is one host's)
"
    );
}

#[tokio::test]
async fn one_repository_that_cannot_start_stops_the_start_naming_it() {
    let team = Team::new().await;
    // `web` already has a daemon of its own (run with --repo, before the team's service).
    let web = team.web.display().to_string();
    let alone = team.spawn(team.home.path(), &["--repo", &web]);
    assert!(
        team.slack
            .wait_until(WAIT, || team.slack.open_connections() == 1)
            .await,
        "{}",
        alone.log()
    );
    let mut service = team.spawn(team.home.path(), &[]);
    assert_eq!(
        service.wait_exit(WAIT).await.code(),
        Some(1),
        "{}",
        service.log()
    );
    let log = service.log();
    assert!(
        log.contains(&format!(
            "codebutler: error: repository `web`: a CodeButler daemon (pid {}) is running for this repository",
            alone.pid()
        )),
        "{log}"
    );
    // Nothing of `api` was started: no store, no second connection.
    assert!(!team.api.join(".codebutler/store.db").exists());
    assert_eq!(team.slack.connections_opened(), 1);
    drop(alone);

    // A broken repository config is a configuration error naming the repository.
    std::fs::write(team.web.join(".codebutler/config.json"), "{\"slack\": ").unwrap();
    let mut service = team.spawn(team.home.path(), &[]);
    assert_eq!(
        service.wait_exit(WAIT).await.code(),
        Some(2),
        "{}",
        service.log()
    );
    let log = service.log();
    assert!(
        log.contains(&format!(
            "codebutler: error: configuration: repository `web`: {}: not valid JSON",
            team.web.join(".codebutler/config.json").display()
        )),
        "{log}"
    );
}

#[tokio::test]
async fn runnerctl_finds_a_repository_by_its_name() {
    let team = Team::new().await;
    let _service = team.start().await;
    let runnerctl = |repo: &'static str| {
        tokio::process::Command::new(env!("CARGO_BIN_EXE_runnerctl"))
            .args(["--repo", repo, "ls"])
            .current_dir(team.outside.path())
            .env("CODEBUTLER_HOME", team.home.path())
            .output()
    };
    let api = runnerctl("api").await.unwrap();
    assert!(api.status.success(), "{api:?}");
    assert_eq!(String::from_utf8_lossy(&api.stdout), "no runs\n");
    let unknown = runnerctl("billing").await.unwrap();
    assert_eq!(unknown.status.code(), Some(2));
    assert_eq!(
        String::from_utf8_lossy(&unknown.stderr),
        format!(
            "runnerctl: error: `billing` is neither a directory nor a repository listed in {} (it lists api, web)\n",
            team.home.path().join("config.json").display()
        )
    );
}

/// Waits until a post of the thread `thread` of `channel` contains `text`; returns it.
pub(crate) async fn wait_post_in(team: &Team, channel: &str, thread: &str, text: &str) -> String {
    let found = || {
        team.posts_in(channel, thread)
            .into_iter()
            .find(|p| p.contains(text))
    };
    let ok = team.slack.wait_until(WAIT, || found().is_some()).await;
    assert!(ok, "no {text:?} in {:?}", team.posts_in(channel, thread));
    found().unwrap_or_default()
}

/// Alice's first direct message to the bot of a service with two repositories is answered
/// with one question listing both by name and channel, without a model call; she answers
/// "web", and her next question is answered by web's PM. After a restart her next direct
/// message goes to web again without a question: the question was asked once.
#[tokio::test]
async fn a_direct_message_asks_which_repository_once_and_remembers_it_across_a_restart() {
    let team = Team::new().await;
    let mut service = team.start().await;
    let dm = slack::dm_channel(USER);
    let first = team
        .slack
        .direct_message(USER, "hello there", None)
        .unwrap();
    let question = wait_post_in(
        &team,
        &dm,
        &first.ts,
        "which one is this conversation about",
    )
    .await;
    assert!(
        question.contains("*api* (<#C0API>), *web* (<#C0WEB>)"),
        "{question}"
    );
    team.slack
        .direct_message(USER, "web", Some(&first.ts))
        .unwrap();
    wait_post_in(
        &team,
        &dm,
        &first.ts,
        "This conversation is about *web* (<#C0WEB>)",
    )
    .await;

    team.model
        .script("DM-WEB-Q", vec![Reply::text("Web answers.")]);
    let asked = team
        .slack
        .direct_message(USER, "DM-WEB-Q: what is this repository?", None)
        .unwrap();
    wait_post_in(&team, &dm, &asked.ts, "Web answers.").await;
    assert!(system_prompt(&team.model, "DM-WEB-Q").contains("PROMPT-WEB"));

    Team::stop(&mut service).await;
    let mut service = team.start().await;
    team.model
        .script("DM-AFTER", vec![Reply::text("Still web.")]);
    let after = team
        .slack
        .direct_message(USER, "DM-AFTER: and its tests?", None)
        .unwrap();
    wait_post_in(&team, &dm, &after.ts, "Still web.").await;
    assert!(system_prompt(&team.model, "DM-AFTER").contains("PROMPT-WEB"));

    let questions = team
        .slack
        .posts()
        .into_iter()
        .filter(|p| p.channel == dm && p.text.contains("which one is this conversation about"))
        .count();
    assert_eq!(questions, 1, "asked once");
    assert!(
        team.model.unscripted().is_empty(),
        "{:?}",
        team.model.unscripted()
    );
    Team::stop(&mut service).await;
    team.assert_slack_clean();
}
