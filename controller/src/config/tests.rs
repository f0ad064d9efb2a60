//! The configuration loader end to end: real files in a scratch directory, through [`load`].

use super::*;

struct Files {
    _dir: tempfile::TempDir,
    sources: ConfigSources,
}

fn files(global: Option<&str>, repo: Option<&str>) -> Files {
    let dir = tempfile::tempdir().unwrap();
    let sources = ConfigSources {
        global: dir.path().join("home/config.json"),
        repo: dir.path().join("repo/.codebutler/config.json"),
    };
    for (path, text) in [(&sources.global, global), (&sources.repo, repo)] {
        if let Some(text) = text {
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        }
    }
    Files { _dir: dir, sources }
}

const GLOBAL: &str =
    r#"{"slack":{"botToken":"xoxb-1","appToken":"xapp-1"},"openrouter":{"apiKey":"sk-or-1"}}"#;
const REPO: &str = r#"{"slack":{"channelID":"C1"},"coder":{"maxTurns":7}}"#;

fn no_env(_: &str) -> Option<String> {
    None
}

#[test]
fn merges_field_by_field_with_repo_winning() {
    let f = files(
        Some(GLOBAL),
        Some(
            r#"{"slack":{"channelID":"C1","apiUrl":"http://127.0.0.1:9/api/"},"openrouter":{"baseUrl":"http://x/v1/"},"coder":{"maxTurns":7}}"#,
        ),
    );
    let c = load(&f.sources, no_env).unwrap();
    assert_eq!(c.slack.bot_token.expose(), "xoxb-1");
    assert_eq!(c.slack.channel_id, "C1");
    assert_eq!(c.slack.api_url, "http://127.0.0.1:9/api");
    assert_eq!(c.openrouter.base_url, "http://x/v1");
    assert_eq!(c.coder.max_turns, 7);
    assert_eq!(c.coder.timeout_mins, 30.0);
    assert_eq!(c.product_manager.default_model(), "moonshotai/kimi-k2");

    let f = files(
        Some(GLOBAL),
        Some(r#"{"slack":{"channelID":"C1","botToken":"xoxb-repo"}}"#),
    );
    let c = load(&f.sources, no_env).unwrap();
    assert_eq!(c.slack.bot_token.expose(), "xoxb-repo");
    assert_eq!(c.slack.app_token.expose(), "xapp-1");
}

#[test]
fn environment_supplies_secrets() {
    let f = files(None, Some(REPO));
    let env = |k: &str| match k {
        ENV_SLACK_BOT_TOKEN => Some("xoxb-env".to_owned()),
        ENV_SLACK_APP_TOKEN => Some("xapp-env".to_owned()),
        ENV_OPENROUTER_API_KEY => Some("sk-or-env".to_owned()),
        _ => None,
    };
    let c = load(&f.sources, env).unwrap();
    assert_eq!(c.slack.bot_token.expose(), "xoxb-env");
    assert_eq!(c.openrouter.api_key.expose(), "sk-or-env");
}

#[test]
fn debug_output_holds_no_secret() {
    let f = files(Some(GLOBAL), Some(REPO));
    let c = load(&f.sources, no_env).unwrap();
    let debug = format!("{c:?}");
    for secret in ["xoxb-1", "xapp-1", "sk-or-1"] {
        assert!(!debug.contains(secret), "{secret} leaked: {debug}");
    }
}

#[test]
fn syntax_error_names_file_and_position() {
    let f = files(Some(GLOBAL), Some("{\"slack\": {\"channelID\": \"C1\",}}"));
    let e = load(&f.sources, no_env).unwrap_err().to_string();
    assert!(
        e.contains(".codebutler/config.json: not valid JSON at line 1"),
        "{e}"
    );
}

#[test]
fn wrong_type_names_file_and_field() {
    let f = files(
        Some(GLOBAL),
        Some(r#"{"slack":{"channelID":"C1"},"coder":{"maxTurns":"many"}}"#),
    );
    let e = load(&f.sources, no_env).unwrap_err().to_string();
    assert!(
        e.contains("repo/.codebutler/config.json: field `coder.maxTurns`"),
        "{e}"
    );
}

#[test]
fn the_example_configs_load() {
    let f = files(
        Some(include_str!("../../../deploy/global-config.example.json")),
        Some(include_str!("../../../deploy/repo-config.example.json")),
    );
    let c = load(&f.sources, no_env).unwrap();
    assert_eq!(c.access.max_worktree_disk_mb, 10000);
    assert_eq!(c.sandbox.disk_mb, 2000);
    assert_eq!(c.build.project_type, ProjectType::Auto);
}

#[test]
fn a_worktree_disk_total_needs_per_thread_disks_to_hold() {
    let f = files(
        Some(GLOBAL),
        Some(
            r#"{"slack":{"channelID":"C1"},"access":{"maxWorktreeDiskMB":64},"sandbox":{"diskMB":0}}"#,
        ),
    );
    let e = load(&f.sources, no_env).unwrap_err().to_string();
    assert!(
        e.contains("field `access.maxWorktreeDiskMB`: 64 MB cannot hold with sandbox.diskMB 0"),
        "{e}"
    );
    assert!(e.contains("set access.maxWorktreeDiskMB to 0"), "{e}");
    // Without a total, no disk per worktree is fine.
    let f = files(
        Some(GLOBAL),
        Some(r#"{"slack":{"channelID":"C1"},"sandbox":{"diskMB":0}}"#),
    );
    assert_eq!(load(&f.sources, no_env).unwrap().sandbox.disk_mb, 0);
}

#[test]
fn build_section_and_worktree_disk_limit() {
    let f = files(Some(GLOBAL), Some(REPO));
    let c = load(&f.sources, no_env).unwrap();
    assert_eq!(
        c.build,
        BuildConfig {
            project_type: ProjectType::Auto,
            init_command: None,
            init_timeout_mins: 10.0,
            prepare_ahead_idle_mins: 30.0,
            max_prepared_ahead: 2,
            test_command: None,
            env: Default::default(),
            path: Vec::new(),
            max_concurrent_builds: 0,
            pre_build_command: None,
        }
    );
    assert_eq!(c.access.max_worktree_disk_mb, 0, "absent means no limit");
    // Global and repository merge field by field; a blank command means none.
    let f = files(
        Some(
            r#"{"slack":{"botToken":"xoxb-1","appToken":"xapp-1"},"openrouter":{"apiKey":"k"},
                "build":{"initCommand":"make setup","initTimeout":2.5},"access":{"maxWorktreeDiskMB":2000}}"#,
        ),
        Some(r#"{"slack":{"channelID":"C1"},"build":{"projectType":"node"}}"#),
    );
    let c = load(&f.sources, no_env).unwrap();
    assert_eq!(c.build.project_type, ProjectType::Node);
    assert_eq!(c.build.init_command.as_deref(), Some("make setup"));
    assert_eq!(c.build.init_timeout_mins, 2.5);
    assert_eq!(c.access.max_worktree_disk_mb, 2000);
    let f = files(
        Some(GLOBAL),
        Some(r#"{"slack":{"channelID":"C1"},"build":{"initCommand":"  "}}"#),
    );
    assert_eq!(load(&f.sources, no_env).unwrap().build.init_command, None);

    for (repo, expected) in [
        (
            r#"{"slack":{"channelID":"C1"},"build":{"projectType":"cobol"}}"#,
            "repo/.codebutler/config.json: field `build.projectType`: `cobol` is not a project type",
        ),
        (
            r#"{"slack":{"channelID":"C1"},"build":{"initTimeout":0}}"#,
            "field `build.initTimeout`: 0 is not a number of minutes",
        ),
        (
            r#"{"slack":{"channelID":"C1"},"build":{"initCmd":"x"}}"#,
            "field `build.initCmd`: unknown field `initCmd`",
        ),
        (
            r#"{"slack":{"channelID":"C1"},"access":{"maxWorktreeDiskMB":-5}}"#,
            "field `access.maxWorktreeDiskMB`",
        ),
    ] {
        let f = files(Some(GLOBAL), Some(repo));
        let e = load(&f.sources, no_env).unwrap_err().to_string();
        assert!(e.contains(expected), "{e}");
    }
}

#[test]
fn build_test_command_env_and_path() {
    let f = files(
        Some(
            r#"{"slack":{"botToken":"xoxb-1","appToken":"xapp-1"},"openrouter":{"apiKey":"k"},
                "build":{"env":{"GOPROXY":"https://proxy.corp.example","GOFLAGS":"-mod=mod"},"path":["/opt/go/bin"]},
                "sandbox":{"readOnly":["/opt/go"]}}"#,
        ),
        Some(
            r#"{"slack":{"channelID":"C1"},"build":{"testCommand":"make check","env":{"GOFLAGS":"-tags=integration"}}}"#,
        ),
    );
    let c = load(&f.sources, no_env).unwrap();
    assert_eq!(c.build.test_command.as_deref(), Some("make check"));
    // build.env merges variable by variable, the repository winning.
    assert_eq!(
        c.build.env,
        [
            ("GOFLAGS".to_owned(), "-tags=integration".to_owned()),
            (
                "GOPROXY".to_owned(),
                "https://proxy.corp.example".to_owned()
            ),
        ]
        .into_iter()
        .collect()
    );
    assert_eq!(c.build.path, ["/opt/go/bin"]);
    let f = files(
        Some(GLOBAL),
        Some(r#"{"slack":{"channelID":"C1"},"build":{"testCommand":" "}}"#),
    );
    assert_eq!(load(&f.sources, no_env).unwrap().build.test_command, None);
    for (repo, expected) in [
        (
            r#"{"slack":{"channelID":"C1"},"build":{"env":{"NPM_TOKEN":"x"}}}"#,
            "repo/.codebutler/config.json: field `build.env`: `NPM_TOKEN` looks like a secret",
        ),
        (
            r#"{"slack":{"channelID":"C1"},"build":{"env":{"PATH":"/x"}}}"#,
            "field `build.env`: `PATH` is built by CodeButler; add directories to it with build.path",
        ),
        (
            r#"{"slack":{"channelID":"C1"},"build":{"path":["bin"]}}"#,
            "field `build.path`: `bin` is not an absolute directory",
        ),
        (
            r#"{"slack":{"channelID":"C1"},"build":{"env":{"GOPROXY":3}}}"#,
            "field `build.env.GOPROXY`",
        ),
        (
            r#"{"slack":{"channelID":"C1"},"build":{"path":["/root/.cargo/bin"]}}"#,
            "field `build.path`: the sandbox cannot see `/root/.cargo/bin`: add it (or the toolchain it belongs to) to sandbox.readOnly",
        ),
    ] {
        let f = files(Some(GLOBAL), Some(repo));
        let e = load(&f.sources, no_env).unwrap_err().to_string();
        assert!(e.contains(expected), "{e}");
    }
}

#[test]
fn max_cost_per_thread_defaults_to_ten_dollars_and_refuses_negatives() {
    let f = files(Some(GLOBAL), Some(REPO));
    let c = load(&f.sources, no_env).unwrap();
    assert_eq!(c.coder.max_cost_per_thread, 10.0);
    let f = files(
        Some(GLOBAL),
        Some(r#"{"slack":{"channelID":"C1"},"coder":{"maxCostPerThread":0}}"#),
    );
    assert_eq!(
        load(&f.sources, no_env).unwrap().coder.max_cost_per_thread,
        0.0
    );
    let f = files(
        Some(GLOBAL),
        Some(r#"{"slack":{"channelID":"C1"},"coder":{"maxCostPerThread":-1}}"#),
    );
    let e = load(&f.sources, no_env).unwrap_err().to_string();
    assert!(
        e.contains("field `coder.maxCostPerThread`: -1 is not"),
        "{e}"
    );
}

#[test]
fn github_merge_strategy_and_watch_interval_default_and_are_checked() {
    let f = files(Some(GLOBAL), Some(REPO));
    let c = load(&f.sources, no_env).unwrap();
    assert_eq!(
        (c.github.merge_strategy, c.github.pr_watch_interval),
        (MergeStrategy::Squash, std::time::Duration::from_secs(60))
    );
    let f = files(
        Some(GLOBAL),
        Some(
            r#"{"slack":{"channelID":"C1"},"github":{"mergeStrategy":"rebase","prWatchIntervalSecs":5}}"#,
        ),
    );
    let c = load(&f.sources, no_env).unwrap();
    assert_eq!(
        (c.github.merge_strategy, c.github.pr_watch_interval),
        (MergeStrategy::Rebase, std::time::Duration::from_secs(5))
    );
    for (github, expected) in [
        (
            r#"{"mergeStrategy":"octopus"}"#,
            "field `github.mergeStrategy`: `octopus` is not one of squash, merge, rebase",
        ),
        (
            r#"{"prWatchIntervalSecs":0}"#,
            "field `github.prWatchIntervalSecs`: 0 is not between 1 and 86400 seconds",
        ),
        (
            r#"{"prWatchIntervalSecs":-5}"#,
            "github.prWatchIntervalSecs",
        ),
    ] {
        let repo = format!(r#"{{"slack":{{"channelID":"C1"}},"github":{github}}}"#);
        let f = files(Some(GLOBAL), Some(&repo));
        let e = load(&f.sources, no_env).unwrap_err().to_string();
        assert!(e.contains(expected), "{e}");
    }
}

#[test]
fn unknown_section_is_refused() {
    let f = files(
        Some(GLOBAL),
        Some(r#"{"slack":{"channelID":"C1"},"tester":{"model":"x"}}"#),
    );
    let e = load(&f.sources, no_env).unwrap_err().to_string();
    assert!(e.contains("unknown field `tester`"), "{e}");
    assert!(e.contains("expected one of"), "{e}");
}

#[test]
fn unknown_pm_model_is_refused() {
    let f = files(
        Some(GLOBAL),
        Some(
            r#"{"slack":{"channelID":"C1"},"productManager":{"default":"gpt5","models":{"kimi":{"model":"m"}}}}"#,
        ),
    );
    let e = load(&f.sources, no_env).unwrap_err().to_string();
    assert!(
        e.contains("field `productManager.default`: names model `gpt5`"),
        "{e}"
    );
}

#[test]
fn missing_token_says_how_to_fix() {
    let f = files(None, Some(REPO));
    let e = load(&f.sources, no_env).unwrap_err().to_string();
    assert!(e.starts_with("missing `slack.botToken`"), "{e}");
    assert!(e.contains(ENV_SLACK_BOT_TOKEN), "{e}");
}

#[test]
fn token_of_the_wrong_kind_is_refused() {
    let f = files(
        Some(
            r#"{"slack":{"botToken":"xapp-oops","appToken":"xapp-1"},"openrouter":{"apiKey":"k"}}"#,
        ),
        Some(REPO),
    );
    let e = load(&f.sources, no_env).unwrap_err().to_string();
    assert!(
        e.contains("home/config.json: field `slack.botToken`: a bot token starts with `xoxb-`"),
        "{e}"
    );
    assert!(!e.contains("xapp-oops"));
}

#[test]
fn no_files_at_all_is_an_error() {
    let f = files(None, None);
    let e = load(&f.sources, no_env).unwrap_err().to_string();
    assert!(e.starts_with("neither "), "{e}");
}

#[test]
fn sandbox_mode_is_an_enum_defaulting_to_enforce() {
    let f = files(Some(GLOBAL), Some(REPO));
    assert_eq!(
        load(&f.sources, no_env).unwrap().sandbox.mode,
        SandboxMode::Enforce
    );
    // Global "none", the repository's `null` sends it back to the default.
    let global_none = r#"{"slack":{"botToken":"xoxb-1","appToken":"xapp-1"},"openrouter":{"apiKey":"k"},"sandbox":{"mode":"none"}}"#;
    let f = files(Some(global_none), Some(REPO));
    assert_eq!(
        load(&f.sources, no_env).unwrap().sandbox.mode,
        SandboxMode::None
    );
    let f = files(
        Some(global_none),
        Some(r#"{"slack":{"channelID":"C1"},"sandbox":{"mode":null}}"#),
    );
    assert_eq!(
        load(&f.sources, no_env).unwrap().sandbox.mode,
        SandboxMode::Enforce
    );
}

#[test]
fn toolchains_are_found_unless_the_setting_turns_it_off() {
    let f = files(Some(GLOBAL), Some(REPO));
    assert!(load(&f.sources, no_env).unwrap().sandbox.find_toolchains);
    let f = files(
        Some(GLOBAL),
        Some(r#"{"slack":{"channelID":"C1"},"sandbox":{"findToolchains":false}}"#),
    );
    assert!(!load(&f.sources, no_env).unwrap().sandbox.find_toolchains);
    let f = files(
        Some(GLOBAL),
        Some(r#"{"slack":{"channelID":"C1"},"sandbox":{"findToolchains":"no"}}"#),
    );
    let e = load(&f.sources, no_env).unwrap_err().to_string();
    assert!(e.contains("sandbox.findToolchains"), "{e}");
}

#[test]
fn an_invalid_sandbox_mode_names_its_file_and_field_and_the_values() {
    let f = files(
        Some(GLOBAL),
        Some(r#"{"slack":{"channelID":"C1"},"sandbox":{"mode":"strict"}}"#),
    );
    let e = load(&f.sources, no_env).unwrap_err().to_string();
    assert_eq!(
        e,
        format!(
            "{}: field `sandbox.mode`: `strict` is not a sandbox mode: use \"enforce\" (default) or \"none\"",
            f.sources.repo.display()
        )
    );
    // In the global file, the global file is named.
    let f = files(
        Some(
            r#"{"slack":{"botToken":"xoxb-1","appToken":"xapp-1"},"openrouter":{"apiKey":"k"},"sandbox":{"mode":"None"}}"#,
        ),
        Some(REPO),
    );
    let e = load(&f.sources, no_env).unwrap_err().to_string();
    assert_eq!(
        e,
        format!(
            "{}: field `sandbox.mode`: `None` is not a sandbox mode: use \"enforce\" (default) or \"none\"",
            f.sources.global.display()
        )
    );
    // Not a string at all.
    let f = files(
        Some(GLOBAL),
        Some(r#"{"slack":{"channelID":"C1"},"sandbox":{"mode":true}}"#),
    );
    let e = load(&f.sources, no_env).unwrap_err().to_string();
    assert!(
        e.contains("repo/.codebutler/config.json: field `sandbox.mode`: invalid type: boolean `true`, expected a string"),
        "{e}"
    );
}

#[test]
fn every_project_type_loads_and_an_invalid_one_names_its_file() {
    for t in ProjectType::ALL {
        let repo = format!(
            r#"{{"slack":{{"channelID":"C1"}},"build":{{"projectType":"{}"}}}}"#,
            t.as_str()
        );
        let f = files(Some(GLOBAL), Some(&repo));
        assert_eq!(load(&f.sources, no_env).unwrap().build.project_type, t);
    }
    let f = files(
        Some(
            r#"{"slack":{"botToken":"xoxb-1","appToken":"xapp-1"},"openrouter":{"apiKey":"k"},"build":{"projectType":"Rust"}}"#,
        ),
        Some(REPO),
    );
    let e = load(&f.sources, no_env).unwrap_err().to_string();
    assert_eq!(
        e,
        format!(
            "{}: field `build.projectType`: `Rust` is not a project type: use one of auto, node, python, rust, go, xcode, generic",
            f.sources.global.display()
        )
    );
}

#[test]
fn an_invalid_value_is_refused_even_where_the_other_file_overrides_it() {
    // Each file is checked on its own (as wrong types and unknown fields always were), so
    // a misspelt global mode cannot hide behind a repository that happens to set its own.
    let f = files(
        Some(
            r#"{"slack":{"botToken":"xoxb-1","appToken":"xapp-1"},"openrouter":{"apiKey":"k"},"sandbox":{"mode":"off"}}"#,
        ),
        Some(r#"{"slack":{"channelID":"C1"},"sandbox":{"mode":"none"}}"#),
    );
    let e = load(&f.sources, no_env).unwrap_err().to_string();
    assert!(
        e.starts_with(&format!(
            "{}: field `sandbox.mode`: `off`",
            f.sources.global.display()
        )),
        "{e}"
    );
}

#[test]
fn the_default_pm_model_is_resolved_from_the_pool() {
    let f = files(
        Some(GLOBAL),
        Some(
            r#"{"slack":{"channelID":"C1"},"productManager":{"models":{"b":{"model":"vendor/b"},"a":{"model":"vendor/a"}}}}"#,
        ),
    );
    let pm = load(&f.sources, no_env).unwrap().product_manager;
    assert_eq!(pm.default, "a", "the first key of the pool");
    assert_eq!(pm.memory_extraction, "a");
    assert_eq!(pm.default_model(), "vendor/a");
    let f = files(
        Some(GLOBAL),
        Some(
            r#"{"slack":{"channelID":"C1"},"productManager":{"default":"b","models":{"b":{"model":"vendor/b"},"a":{"model":"vendor/a"}}}}"#,
        ),
    );
    assert_eq!(
        load(&f.sources, no_env)
            .unwrap()
            .product_manager
            .default_model(),
        "vendor/b"
    );
}

/// A global config directory and git repositories under one scratch directory, for the
/// `repositories` list.
struct Team {
    dir: tempfile::TempDir,
}

impl Team {
    fn new(global: serde_json::Value) -> Self {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("home")).unwrap();
        let team = Team { dir };
        team.write_global(global);
        team
    }

    fn home(&self) -> PathBuf {
        self.dir.path().join("home")
    }

    fn write_global(&self, global: serde_json::Value) {
        std::fs::write(self.home().join("config.json"), global.to_string()).unwrap();
    }

    /// A git repository `name` with `config` as its `.codebutler/config.json`.
    fn repo(&self, name: &str, config: Option<&str>) -> PathBuf {
        let path = self.dir.path().join(name);
        git2::Repository::init(&path).unwrap();
        if let Some(config) = config {
            std::fs::create_dir_all(path.join(".codebutler")).unwrap();
            std::fs::write(path.join(".codebutler/config.json"), config).unwrap();
        }
        path.canonicalize().unwrap()
    }

    fn load(&self) -> Result<Vec<Repository>, ConfigError> {
        let entries = entries(&self.home().join("config.json"))?.expect("a repositories list");
        load_repositories(&self.home(), &entries, no_env)
    }
}

fn team_global(repositories: serde_json::Value) -> serde_json::Value {
    let mut global: serde_json::Value = serde_json::from_str(GLOBAL).unwrap();
    global["repositories"] = repositories;
    global
}

#[test]
fn repositories_take_their_channel_from_the_entry_else_their_own_config() {
    let team = Team::new(serde_json::json!({}));
    let api = team.repo("api", None);
    let web = team.repo(
        "web",
        Some(r#"{"slack":{"channelID":"CWEB"},"coder":{"maxTurns":7}}"#),
    );
    team.write_global(team_global(serde_json::json!([
        {"path": api, "channel": "CAPI"},
        {"name": "frontend", "path": web.join("."), "channel": null},
    ])));
    let repos = team.load().unwrap();
    let seen: Vec<_> = repos
        .iter()
        .map(|r| {
            (
                r.entry.name.as_str(),
                r.entry.path.clone(),
                r.config.slack.channel_id.as_str(),
                r.config.coder.max_turns,
            )
        })
        .collect();
    assert_eq!(
        seen,
        [("api", api, "CAPI", 25), ("frontend", web, "CWEB", 7)]
    );
    // One repository per process, as before, without the key.
    let f = files(Some(GLOBAL), Some(REPO));
    assert!(entries(&f.sources.global).unwrap().is_none());
}

#[test]
fn a_duplicate_name_or_channel_is_an_error_naming_both_entries() {
    let team = Team::new(serde_json::json!({}));
    let api = team.repo("api", None);
    let web = team.repo("web", None);
    let global = team.home().join("config.json");
    team.write_global(team_global(serde_json::json!([
        {"name": "app", "path": api, "channel": "C1"},
        {"name": "App", "path": web, "channel": "C2"},
    ])));
    let e = team.load().unwrap_err().to_string();
    assert_eq!(
        e,
        format!(
            "{}: repositories[1] (`App`): the name is already used by the entry for {} (`app`); names must be unique (set `name`)",
            global.display(),
            api.display()
        )
    );
    team.write_global(team_global(serde_json::json!([
        {"path": api, "channel": "C1"},
        {"path": web, "channel": "C1"},
    ])));
    assert_eq!(
        team.load().unwrap_err().to_string(),
        format!(
            "{}: repositories `api` and `web` both use channel C1: each repository needs its own channel",
            global.display()
        )
    );
}

#[test]
fn a_repository_with_its_own_slack_tokens_is_refused_in_one_app() {
    let team = Team::new(serde_json::json!({}));
    let api = team.repo("api", None);
    let web = team.repo("web", Some(r#"{"slack":{"appToken":"xapp-other"}}"#));
    team.write_global(team_global(serde_json::json!([
        {"path": api, "channel": "C1"},
        {"path": web, "channel": "C2"},
    ])));
    assert_eq!(
        team.load().unwrap_err().to_string(),
        format!(
            "{}: repository `web` ({}) sets slack.appToken differently from repository `api`: one service serves one Slack app, so set the Slack tokens and slack.apiUrl in the global config only",
            team.home().join("config.json").display(),
            web.join(".codebutler/config.json").display()
        )
    );
}

#[test]
fn bad_entries_and_a_misplaced_list_name_their_file() {
    let team = Team::new(serde_json::json!({}));
    let api = team.repo("api", Some(r#"{"repositories": []}"#));
    let global = team.home().join("config.json");
    for (repositories, expected) in [
        (
            serde_json::json!([{"path": "relative/api"}]),
            "repositories[0]: path relative/api is not absolute".to_owned(),
        ),
        (
            serde_json::json!([{"path": team.dir.path().join("missing")}]),
            format!(
                "repositories[0]: {} is not a directory",
                team.dir.path().join("missing").display()
            ),
        ),
        (
            serde_json::json!([{"path": api, "chanel": "C1"}]),
            "repositories[0]: unknown field `chanel`, expected one of `name`, `path`, `channel`"
                .to_owned(),
        ),
        (
            serde_json::json!([{"name": "my api", "path": api}]),
            "repositories[0] (`my api`): a name is letters, digits, `.`, `_` and `-`, starting with a letter or digit (set `name`)".to_owned(),
        ),
        (
            serde_json::json!([]),
            "`repositories` is empty: list at least one repository, or remove the key and run codebutler --repo DIR".to_owned(),
        ),
    ] {
        team.write_global(team_global(repositories));
        assert_eq!(
            team.load().unwrap_err().to_string(),
            format!("{}: {expected}", global.display())
        );
    }
    team.write_global(team_global(
        serde_json::json!([{"path": api, "channel": "C1"}]),
    ));
    assert_eq!(
        team.load().unwrap_err().to_string(),
        format!(
            "repository `api`: {}: field `repositories`: the list of repositories belongs in the global config ({})",
            api.join(".codebutler/config.json").display(),
            global.display()
        )
    );
}

#[test]
fn the_connection_grace_period_defaults_to_a_minute_and_is_checked() {
    let f = files(Some(GLOBAL), Some(REPO));
    assert_eq!(
        load(&f.sources, no_env).unwrap().slack.connection_grace,
        std::time::Duration::from_secs(60)
    );
    let f = files(
        Some(GLOBAL),
        Some(r#"{"slack":{"channelID":"C1","connectionGraceSeconds":0}}"#),
    );
    assert_eq!(
        load(&f.sources, no_env).unwrap_err().to_string(),
        format!(
            "{}: field `slack.connectionGraceSeconds`: 0 is not a number of seconds between 1 and 3600",
            f.sources.repo.display()
        )
    );
}
#[test]
fn runner_launcher_defaults_to_local_and_a_container_gets_its_defaults() {
    let f = files(Some(GLOBAL), Some(REPO));
    assert_eq!(
        load(&f.sources, no_env).unwrap().runner,
        RunnerLauncher::Local
    );
    let f = files(
        Some(GLOBAL),
        Some(r#"{"slack":{"channelID":"C1"},"runner":{"launcher":"container"}}"#),
    );
    assert_eq!(
        load(&f.sources, no_env).unwrap().runner,
        RunnerLauncher::Container(ContainerConfig {
            engine: "podman".into(),
            image: DEFAULT_RUNNER_IMAGE.into(),
            runtime: None,
            extra_args: Vec::new(),
        })
    );
    // The global file chooses containers; the repository names its image and runtime.
    let f = files(
        Some(
            r#"{"slack":{"botToken":"xoxb-1","appToken":"xapp-1"},"openrouter":{"apiKey":"k"},
                "runner":{"launcher":"container","container":{"engine":"/usr/bin/podman"}}}"#,
        ),
        Some(
            r#"{"slack":{"channelID":"C1"},"runner":{"container":{"image":"registry.local/runner:7","runtime":"runc","extraArgs":["--label=team=api"]}}}"#,
        ),
    );
    assert_eq!(
        load(&f.sources, no_env).unwrap().runner,
        RunnerLauncher::Container(ContainerConfig {
            engine: "/usr/bin/podman".into(),
            image: "registry.local/runner:7".into(),
            runtime: Some("runc".into()),
            extra_args: vec!["--label=team=api".into()],
        })
    );
}

#[test]
fn a_runner_launcher_that_cannot_work_is_refused_naming_its_field() {
    let load_repo = |repo: &str| {
        let f = files(Some(GLOBAL), Some(repo));
        let e = load(&f.sources, no_env).unwrap_err().to_string();
        let path = f.sources.repo.display().to_string();
        (e, path)
    };
    let (e, path) = load_repo(
        r#"{"slack":{"channelID":"C1"},"runner":{"launcher":"container","container":{"engine":"docker"}}}"#,
    );
    assert!(
        e.starts_with(&format!(
            "{path}: field `runner.container.engine`: `docker` cannot run runners"
        )),
        "{e}"
    );
    assert!(e.contains("use \"podman\""), "{e}");
    let (e, _) = load_repo(
        r#"{"slack":{"channelID":"C1"},"runner":{"launcher":"container","container":{"image":" "}}}"#,
    );
    assert!(
        e.contains("field `runner.container.image`: the image name is empty"),
        "{e}"
    );
    let (e, _) = load_repo(r#"{"slack":{"channelID":"C1"},"runner":{"launcher":"pod"}}"#);
    assert!(
        e.contains("field `runner.launcher`") && e.contains("expected `local` or `container`"),
        "{e}"
    );
    let (e, _) = load_repo(
        r#"{"slack":{"channelID":"C1"},"runner":{"launcher":"container","container":{"networks":"host"}}}"#,
    );
    assert!(e.contains("unknown field `networks`"), "{e}");
}

#[test]
fn the_store_is_sqlite_unless_the_global_config_or_the_environment_names_a_server() {
    let f = files(Some(GLOBAL), Some(REPO));
    assert_eq!(
        load(&f.sources, no_env).unwrap().store,
        crate::store::StoreUrl::Sqlite
    );
    let url = "postgres://cb:hunter2@db.internal/codebutler";
    let global = format!(
        r#"{{"slack":{{"botToken":"xoxb-1","appToken":"xapp-1"}},"openrouter":{{"apiKey":"k"}},"store":{{"url":"{url}"}}}}"#
    );
    let f = files(Some(&global), Some(REPO));
    let config = load(&f.sources, no_env).unwrap();
    assert_eq!(
        config.store,
        crate::store::StoreUrl::Postgres(crate::secret::Secret::new(url))
    );
    assert!(!format!("{config:?}").contains("hunter2"), "a secret");
    // The environment wins over the file.
    let other = "postgres://cb:other@db2/codebutler";
    let env = |k: &str| (k == ENV_STORE_URL).then(|| other.to_owned());
    assert_eq!(
        load(&f.sources, env).unwrap().store,
        crate::store::StoreUrl::Postgres(crate::secret::Secret::new(other))
    );
}

#[test]
fn a_bad_store_url_is_refused_without_showing_it() {
    let global = r#"{"slack":{"botToken":"xoxb-1","appToken":"xapp-1"},"openrouter":{"apiKey":"k"},"store":{"url":"mysql://root:hunter2@db/x"}}"#;
    let f = files(Some(global), Some(REPO));
    let e = load(&f.sources, no_env).unwrap_err().to_string();
    assert_eq!(
        e,
        format!(
            "{}: field `store.url`: must be \"sqlite\" or a postgres:// URL",
            f.sources.global.display()
        )
    );
    let f = files(Some(GLOBAL), Some(REPO));
    let env = |k: &str| (k == ENV_STORE_URL).then(|| "postgres://cb:hunter2@db:port/x".to_owned());
    let e = load(&f.sources, env).unwrap_err().to_string();
    assert!(
        e.starts_with("environment variable CODEBUTLER_STORE_URL: is not a valid PostgreSQL URL"),
        "{e}"
    );
    assert!(!e.contains("hunter2"), "{e}");
}

#[test]
fn the_store_url_belongs_in_the_global_config() {
    let repo = r#"{"slack":{"channelID":"C1"},"store":{"url":"sqlite"}}"#;
    let f = files(Some(GLOBAL), Some(repo));
    let e = load(&f.sources, no_env).unwrap_err().to_string();
    assert!(
        e.starts_with(&format!(
            "{}: field `store.url`: belongs in the global config",
            f.sources.repo.display()
        )),
        "{e}"
    );
}

#[test]
fn github_review_loop_keys_default_and_are_checked() {
    let f = files(Some(GLOBAL), Some(REPO));
    let c = load(&f.sources, no_env).unwrap();
    assert_eq!(
        (
            c.github.ignore_bots.clone(),
            c.github.max_review_rounds,
            c.github.review_quiet
        ),
        (Vec::<String>::new(), 3, std::time::Duration::from_secs(90))
    );
    assert_eq!(
        (c.github.review_from, c.github.max_sorts_per_hour),
        (super::ReviewFrom::Write, 6),
        "only people with write access, six sorting calls an hour"
    );
    let f = files(
        Some(GLOBAL),
        Some(
            r#"{"slack":{"channelID":"C1"},"github":{"ignoreBots":["dependabot","renovate[bot]"],"maxReviewRounds":1,"reviewQuietSecs":0,"reviewFrom":"anyone","maxSortsPerHour":60}}"#,
        ),
    );
    let c = load(&f.sources, no_env).unwrap();
    assert_eq!(
        (
            c.github.ignore_bots.clone(),
            c.github.max_review_rounds,
            c.github.review_quiet
        ),
        (
            vec!["dependabot".to_owned(), "renovate[bot]".to_owned()],
            1,
            std::time::Duration::ZERO
        )
    );
    assert_eq!(
        (c.github.review_from, c.github.max_sorts_per_hour),
        (super::ReviewFrom::Anyone, 60)
    );
    for (github, expected) in [
        (
            r#"{"ignoreBots":["dependabot",""]}"#,
            "field `github.ignoreBots`: a login is empty",
        ),
        (r#"{"ignoreBots":"dependabot"}"#, "github.ignoreBots"),
        (
            r#"{"maxReviewRounds":101}"#,
            "field `github.maxReviewRounds`: 101 is more than 100",
        ),
        (r#"{"maxReviewRounds":-1}"#, "github.maxReviewRounds"),
        (
            r#"{"reviewQuietSecs":86401}"#,
            "field `github.reviewQuietSecs`: 86401 is more than 86400 seconds",
        ),
        (
            r#"{"reviewFrom":"members"}"#,
            "field `github.reviewFrom`: `members` is not one of write, anyone",
        ),
        (
            r#"{"maxSortsPerHour":0}"#,
            "field `github.maxSortsPerHour`: 0 is not between 1 and 60",
        ),
        (
            r#"{"maxSortsPerHour":61}"#,
            "field `github.maxSortsPerHour`: 61 is not between 1 and 60",
        ),
    ] {
        let repo = format!(r#"{{"slack":{{"channelID":"C1"}},"github":{github}}}"#);
        let f = files(Some(GLOBAL), Some(&repo));
        let e = load(&f.sources, no_env).unwrap_err().to_string();
        assert!(e.contains(expected), "{e}");
    }
}

#[test]
fn merge_checks_are_on_by_default_and_each_turns_off_alone() {
    let f = files(Some(GLOBAL), Some(REPO));
    let c = load(&f.sources, no_env).unwrap();
    assert_eq!(
        c.github.merge_checks,
        super::MergeChecks {
            changes_requested: true,
            unresolved_threads: true
        }
    );
    for (checks, expected) in [
        (r#"{"changesRequested":false}"#, (false, true)),
        (r#"{"unresolvedThreads":false}"#, (true, false)),
        (
            r#"{"changesRequested":false,"unresolvedThreads":false}"#,
            (false, false),
        ),
        ("{}", (true, true)),
    ] {
        let repo =
            format!(r#"{{"slack":{{"channelID":"C1"}},"github":{{"mergeChecks":{checks}}}}}"#);
        let f = files(Some(GLOBAL), Some(&repo));
        let c = load(&f.sources, no_env).unwrap();
        let got = c.github.merge_checks;
        assert_eq!(
            (got.changes_requested, got.unresolved_threads),
            expected,
            "{checks}"
        );
    }
    for bad in [
        r#"{"mergeChecks":{"ciPassed":true}}"#,
        r#"{"mergeChecks":{"changesRequested":"yes"}}"#,
        r#"{"mergeChecks":true}"#,
    ] {
        let repo = format!(r#"{{"slack":{{"channelID":"C1"}},"github":{bad}}}"#);
        let f = files(Some(GLOBAL), Some(&repo));
        let e = load(&f.sources, no_env).unwrap_err().to_string();
        assert!(e.contains("mergeChecks") || e.contains("ciPassed"), "{e}");
    }
}

#[test]
fn preparing_ahead_is_on_by_default_and_zero_turns_it_off() {
    let f = files(Some(GLOBAL), Some(REPO));
    let c = load(&f.sources, no_env).unwrap();
    assert_eq!(
        (c.build.prepare_ahead_idle_mins, c.build.max_prepared_ahead),
        (30.0, 2)
    );
    let f = files(
        Some(GLOBAL),
        Some(
            r#"{"slack":{"channelID":"C1"},"build":{"prepareAheadIdleMinutes":0,"maxPreparedAhead":5}}"#,
        ),
    );
    let c = load(&f.sources, no_env).unwrap();
    assert_eq!(
        (c.build.prepare_ahead_idle_mins, c.build.max_prepared_ahead),
        (0.0, 5)
    );
    let f = files(
        Some(GLOBAL),
        Some(r#"{"slack":{"channelID":"C1"},"build":{"prepareAheadIdleMinutes":0.5}}"#),
    );
    assert_eq!(
        load(&f.sources, no_env)
            .unwrap()
            .build
            .prepare_ahead_idle_mins,
        0.5
    );
    for (build, expected) in [
        (
            r#"{"prepareAheadIdleMinutes":-1}"#,
            "field `build.prepareAheadIdleMinutes`: -1 is not a number of minutes",
        ),
        (
            r#"{"prepareAheadIdleMinutes":2000}"#,
            "field `build.prepareAheadIdleMinutes`: 2000 is not a number of minutes",
        ),
        (
            r#"{"maxPreparedAhead":33}"#,
            "field `build.maxPreparedAhead`: 33 is more than 32",
        ),
        (r#"{"maxPreparedAhead":-1}"#, "build.maxPreparedAhead"),
    ] {
        let repo = format!(r#"{{"slack":{{"channelID":"C1"}},"build":{build}}}"#);
        let f = files(Some(GLOBAL), Some(&repo));
        let e = load(&f.sources, no_env).unwrap_err().to_string();
        assert!(e.contains(expected), "{e}");
    }
}

/// The repository's config made a link (a repository can commit one: to a file of secrets,
/// or to another config that runs another `gh`) is refused, never followed; the global
/// file, the operator's own, may be one.
#[test]
fn a_repository_config_that_is_a_link_is_refused() {
    let f = files(None, None);
    let elsewhere = f.sources.global.parent().unwrap().join("elsewhere.json");
    std::fs::create_dir_all(elsewhere.parent().unwrap()).unwrap();
    std::fs::write(&elsewhere, REPO).unwrap();
    std::fs::write(&f.sources.global, GLOBAL).unwrap();
    std::fs::create_dir_all(f.sources.repo.parent().unwrap()).unwrap();
    std::os::unix::fs::symlink(&elsewhere, &f.sources.repo).unwrap();
    let err = load(&f.sources, no_env).unwrap_err();
    assert!(matches!(err, ConfigError::NotRegular { .. }), "{err:?}");
    assert!(err.to_string().contains("not a regular file"), "{err}");

    // The global file as a link is the operator's choice.
    std::fs::remove_file(&f.sources.repo).unwrap();
    std::fs::write(&f.sources.repo, REPO).unwrap();
    let global = f.sources.global.with_file_name("real.json");
    std::fs::rename(&f.sources.global, &global).unwrap();
    std::os::unix::fs::symlink(&global, &f.sources.global).unwrap();
    assert!(load(&f.sources, no_env).is_ok());
}

#[test]
fn the_defaults_name_models_as_openrouter_does() {
    let f = files(Some(GLOBAL), Some(r#"{"slack":{"channelID":"C1"}}"#));
    let c = load(&f.sources, no_env).unwrap();
    assert_eq!(c.coder.model, "anthropic/claude-opus-4.6");
    assert_eq!(c.product_manager.default_model(), "moonshotai/kimi-k2");
    // The default Artist draws with OpenAI's own images API, not through OpenRouter.
    assert_eq!(
        (c.artist.provider.as_str(), c.artist.model.as_str()),
        ("openai", "gpt-image-1")
    );
    let ids = c.provider_model_ids();
    let pairs: Vec<(&str, &str)> = ids
        .iter()
        .map(|m| (m.field.as_str(), m.id.as_str()))
        .collect();
    assert_eq!(
        pairs,
        [
            ("productManager.models.kimi.model", "moonshotai/kimi-k2"),
            ("coder.model", "anthropic/claude-opus-4.6"),
        ]
    );
}

#[test]
fn every_model_id_for_the_provider_is_listed_with_its_field() {
    let f = files(
        Some(GLOBAL),
        Some(
            r#"{"slack":{"channelID":"C1"},
                "productManager":{"default":"b","memoryExtraction":"a","models":{
                    "b":{"model":"openai/gpt-5"},"a":{"model":"moonshotai/kimi-k2","label":"Kimi"}}},
                "coder":{"model":"anthropic/claude-sonnet-4.5"},
                "artist":{"provider":"OpenRouter","model":"google/gemini-2.5-flash-image"}}"#,
        ),
    );
    let c = load(&f.sources, no_env).unwrap();
    let pairs: Vec<(String, String)> = c
        .provider_model_ids()
        .into_iter()
        .map(|m| (m.field, m.id))
        .collect();
    let expected = [
        ("productManager.models.a.model", "moonshotai/kimi-k2"),
        ("productManager.models.b.model", "openai/gpt-5"),
        ("coder.model", "anthropic/claude-sonnet-4.5"),
        ("artist.model", "google/gemini-2.5-flash-image"),
    ]
    .map(|(f, id)| (f.to_owned(), id.to_owned()));
    assert_eq!(pairs, expected);
}

#[test]
fn pr_instructions_and_the_log_files_rotation() {
    let c = load(&files(Some(GLOBAL), Some(REPO)).sources, no_env).unwrap();
    assert_eq!(c.changes_workflow.pr_instructions, None);
    assert_eq!(
        c.logging,
        LoggingConfig {
            max_file_bytes: 10 * 1024 * 1024,
            keep_files: 5
        }
    );
    let f = files(
        Some(
            r#"{"slack":{"botToken":"xoxb-1","appToken":"xapp-1"},"openrouter":{"apiKey":"sk-or-1"},"logging":{"maxFileMB":0.5,"keepFiles":0}}"#,
        ),
        Some(
            r#"{"slack":{"channelID":"C1"},"changesWorkflow":{"prInstructions":"  Name the ticket.\n"}}"#,
        ),
    );
    let c = load(&f.sources, no_env).unwrap();
    assert_eq!(
        c.changes_workflow.pr_instructions.as_deref(),
        Some("Name the ticket.")
    );
    assert_eq!(c.logging.max_file_bytes, 512 * 1024);
    assert_eq!(c.logging.keep_files, 0);
    for (bad, field) in [
        (r#""logging":{"maxFileMB":0}"#, "logging.maxFileMB"),
        (r#""logging":{"maxFileMB":2048}"#, "logging.maxFileMB"),
        (r#""logging":{"keepFiles":101}"#, "logging.keepFiles"),
        (
            r#""changesWorkflow":{"prInstruction":"x"}"#,
            "changesWorkflow",
        ),
    ] {
        let repo = format!(r#"{{"slack":{{"channelID":"C1"}},{bad}}}"#);
        let e = load(&files(Some(GLOBAL), Some(&repo)).sources, no_env)
            .unwrap_err()
            .to_string();
        assert!(e.contains(field), "{bad}: {e}");
    }
    let long = "x".repeat(9000);
    let repo = format!(
        r#"{{"slack":{{"channelID":"C1"}},"changesWorkflow":{{"prInstructions":"{long}"}}}}"#
    );
    let e = load(&files(Some(GLOBAL), Some(&repo)).sources, no_env)
        .unwrap_err()
        .to_string();
    assert!(e.contains("changesWorkflow.prInstructions"), "{e}");
}

#[test]
fn preparations_are_unlimited_by_default_and_a_pre_build_command_is_kept() {
    let f = files(Some(GLOBAL), Some(REPO));
    let c = load(&f.sources, no_env).unwrap();
    assert_eq!(
        (c.build.max_concurrent_builds, c.build.pre_build_command),
        (0, None)
    );
    let f = files(
        Some(GLOBAL),
        Some(
            r#"{"slack":{"channelID":"C1"},"build":{"maxConcurrentBuilds":1,"preBuildCommand":"bundle exec pod install"}}"#,
        ),
    );
    let c = load(&f.sources, no_env).unwrap();
    assert_eq!(c.build.max_concurrent_builds, 1);
    assert_eq!(
        c.build.pre_build_command.as_deref(),
        Some("bundle exec pod install")
    );
    let f = files(
        Some(GLOBAL),
        Some(r#"{"slack":{"channelID":"C1"},"build":{"preBuildCommand":"  "}}"#),
    );
    assert_eq!(
        load(&f.sources, no_env).unwrap().build.pre_build_command,
        None
    );
    let f = files(
        Some(GLOBAL),
        Some(r#"{"slack":{"channelID":"C1"},"build":{"maxConcurrentBuilds":65}}"#),
    );
    let e = load(&f.sources, no_env).unwrap_err().to_string();
    assert!(
        e.contains("build.maxConcurrentBuilds") && e.contains("65 is more than 64"),
        "{e}"
    );
}

#[test]
fn one_service_has_one_limit_on_preparations() {
    let team = Team::new(serde_json::json!({}));
    let api = team.repo("api", None);
    let web = team.repo("web", Some(r#"{"build":{"maxConcurrentBuilds":1}}"#));
    let mut global = team_global(serde_json::json!([
        {"path": api, "channel": "C1"},
        {"path": web, "channel": "C2"},
    ]));
    global["build"] = serde_json::json!({"maxConcurrentBuilds": 2});
    team.write_global(global.clone());
    // Set in the global config only, every repository has it.
    let web_alike = team.repo("web2", None);
    let mut alike = global.clone();
    alike["repositories"][1]["path"] = serde_json::json!(web_alike);
    team.write_global(alike);
    let repos = team.load().unwrap();
    assert!(
        repos
            .iter()
            .all(|r| r.config.build.max_concurrent_builds == 2)
    );
    team.write_global(global);
    assert_eq!(
        team.load().unwrap_err().to_string(),
        format!(
            "{}: repository `web` ({}) sets build.maxConcurrentBuilds differently from repository `api`: the limit is one for the machine's preparations, so set it in the global config only",
            team.home().join("config.json").display(),
            web.join(".codebutler/config.json").display()
        )
    );
}

#[test]
fn mcp_servers_are_checked_and_their_tokens_come_from_the_environment() {
    let repo = |servers: &str| {
        format!(r#"{{"slack":{{"channelID":"C1"}},"coder":{{"mcpServers":{servers}}}}}"#)
    };
    let f = files(
        Some(GLOBAL),
        Some(&repo(
            r#"{"everything":{"command":"node","args":["/opt/everything/index.js","stdio"]},
                "docs":{"url":"https://mcp.example.com/mcp","tokenEnv":"DOCS_MCP_TOKEN"},
                "open":{"url":"http://mcp.example.com/mcp"}}"#,
        )),
    );
    let env = |k: &str| (k == "DOCS_MCP_TOKEN").then(|| "docs-token-1".to_owned());
    let c = load(&f.sources, env).unwrap();
    let servers = &c.coder.mcp_servers;
    assert_eq!(
        servers.stdio,
        [StdioMcpServer {
            name: "everything".into(),
            command: "node".into(),
            args: vec!["/opt/everything/index.js".into(), "stdio".into()],
        }]
    );
    let remote: Vec<(&str, &str, Option<&str>)> = servers
        .remote
        .iter()
        .map(|s| {
            (
                s.name.as_str(),
                s.url.as_str(),
                s.token.as_ref().map(|t| t.expose()),
            )
        })
        .collect();
    assert_eq!(
        remote,
        [
            ("docs", "https://mcp.example.com/mcp", Some("docs-token-1")),
            ("open", "http://mcp.example.com/mcp", None),
        ]
    );
    assert!(!format!("{c:?}").contains("docs-token-1"));

    // The token's variable must be set.
    let e = load(&f.sources, no_env).unwrap_err().to_string();
    assert!(
        e.contains("coder.mcpServers.docs") && e.contains("DOCS_MCP_TOKEN, which is not set"),
        "{e}"
    );
    for (servers, expected) in [
        (r#"{"a b":{"command":"x"}}"#, "letters, digits"),
        (r#"{"a__b":{"command":"x"}}"#, "no `__`"),
        (r#"{"x":{"command":"x","url":"http://h/"}}"#, "not both"),
        (r#"{"x":{}}"#, "not both"),
        (
            r#"{"x":{"url":"file:///etc/passwd"}}"#,
            "not an http(s) URL",
        ),
        (
            r#"{"x":{"command":"node","tokenEnv":"T"}}"#,
            "holds no secret",
        ),
        (
            r#"{"x":{"url":"http://h/","args":["a"]}}"#,
            "args are for stdio",
        ),
        (r#"{"x":{"command":" "}}"#, "command is empty"),
    ] {
        let f = files(Some(GLOBAL), Some(&repo(servers)));
        let e = load(&f.sources, no_env).unwrap_err().to_string();
        assert!(e.contains(expected), "{servers}: {e}");
    }
}

#[test]
fn the_over_budget_pm_model_is_a_key_of_the_pool() {
    let pool =
        r#""models":{"main":{"model":"openai/gpt-5"},"lean":{"model":"moonshotai/kimi-k2"}}"#;
    let f = files(
        Some(GLOBAL),
        Some(&format!(
            r#"{{"slack":{{"channelID":"C1"}},"productManager":{{"overBudget":"lean",{pool}}}}}"#
        )),
    );
    let c = load(&f.sources, no_env).unwrap();
    assert_eq!(
        c.product_manager.over_budget.as_deref(),
        Some("moonshotai/kimi-k2")
    );
    let f = files(
        Some(GLOBAL),
        Some(&format!(
            r#"{{"slack":{{"channelID":"C1"}},"productManager":{{"overBudget":"tiny",{pool}}}}}"#
        )),
    );
    let e = load(&f.sources, no_env).unwrap_err().to_string();
    assert!(
        e.contains("field `productManager.overBudget`: names model `tiny`"),
        "{e}"
    );
    let f = files(Some(GLOBAL), Some(r#"{"slack":{"channelID":"C1"}}"#));
    assert_eq!(
        load(&f.sources, no_env)
            .unwrap()
            .product_manager
            .over_budget,
        None
    );
}

#[test]
fn the_request_reaction_is_off_by_default_named_without_colons_and_checked() {
    let f = files(Some(GLOBAL), Some(REPO));
    assert_eq!(load(&f.sources, no_env).unwrap().triggers.reaction, None);
    let f = files(
        Some(GLOBAL),
        Some(r#"{"slack":{"channelID":"C1"},"triggers":{"reaction":":CodeButler:"}}"#),
    );
    assert_eq!(
        load(&f.sources, no_env)
            .unwrap()
            .triggers
            .reaction
            .as_deref(),
        Some("codebutler")
    );
    for bad in ["", "::", "two words", "<@U1>"] {
        let repo = format!(
            r#"{{"slack":{{"channelID":"C1"}},"triggers":{{"reaction":{}}}}}"#,
            serde_json::json!(bad)
        );
        let f = files(Some(GLOBAL), Some(&repo));
        let e = load(&f.sources, no_env).unwrap_err().to_string();
        assert!(e.contains("field `triggers.reaction`"), "{bad:?}: {e}");
        assert!(e.contains("config.json"), "{e}");
    }
}

#[test]
fn the_reviewer_is_off_unless_its_model_is_set() {
    let f = files(Some(GLOBAL), Some(r#"{"slack":{"channelID":"C1"}}"#));
    assert_eq!(load(&f.sources, no_env).unwrap().reviewer, None);
    let f = files(
        Some(GLOBAL),
        Some(
            r#"{"slack":{"channelID":"C1"},"reviewer":{"model":"openai/gpt-5-mini","maxCostPerReview":0.5,"fallback":" google/gemini-2.5-pro "}}"#,
        ),
    );
    let config = load(&f.sources, no_env).unwrap();
    assert_eq!(
        config.reviewer,
        Some(ReviewerConfig {
            model: "openai/gpt-5-mini".into(),
            max_cost_per_review: Some(0.5),
            fallback: Some("google/gemini-2.5-pro".into()),
        })
    );
    let ids = config.provider_model_ids();
    assert!(
        ids.iter()
            .any(|f| f.field == "reviewer.model" && f.id == "openai/gpt-5-mini")
    );
    assert!(
        ids.iter()
            .any(|f| f.field == "reviewer.fallback" && f.id == "google/gemini-2.5-pro")
    );
    for (reviewer, expected) in [
        (
            r#"{"model":"m","maxCostPerReview":-1}"#,
            "field `reviewer.maxCostPerReview`",
        ),
        (r#"{"maxCostPerReview":1}"#, "reviewer.model is not"),
        (r#"{"fallback":"m2"}"#, "field `reviewer.fallback`"),
        (r#"{"model":"m","approve":true}"#, "unknown field `approve`"),
    ] {
        let repo = format!(r#"{{"slack":{{"channelID":"C1"}},"reviewer":{reviewer}}}"#);
        let f = files(Some(GLOBAL), Some(&repo));
        let e = load(&f.sources, no_env).unwrap_err().to_string();
        assert!(e.contains(expected), "{reviewer}: {e}");
    }
}

#[test]
fn the_researcher_takes_the_pms_model_unless_told() {
    let f = files(Some(GLOBAL), Some(r#"{"slack":{"channelID":"C1"}}"#));
    let config = load(&f.sources, no_env).unwrap();
    assert_eq!(
        config.researcher.model,
        config.product_manager.default_model()
    );
    assert_eq!(config.researcher.fallback, None);
    let f = files(
        Some(GLOBAL),
        Some(
            r#"{"slack":{"channelID":"C1"},"researcher":{"model":"perplexity/sonar","fallback":"perplexity/sonar-pro"}}"#,
        ),
    );
    let config = load(&f.sources, no_env).unwrap();
    assert_eq!(config.researcher.model, "perplexity/sonar");
    assert_eq!(
        config.researcher.fallback.as_deref(),
        Some("perplexity/sonar-pro")
    );
    assert!(
        config
            .provider_model_ids()
            .iter()
            .any(|f| f.field == "researcher.fallback" && f.id == "perplexity/sonar-pro")
    );
    assert!(
        config
            .provider_model_ids()
            .iter()
            .any(|f| f.field == "researcher.model" && f.id == "perplexity/sonar")
    );
}

#[test]
fn the_artist_draws_through_openai_or_openrouter_and_its_price_is_a_price() {
    let ok = files(
        Some(GLOBAL),
        Some(
            r#"{"slack":{"channelID":"C1"},
                "artist":{"provider":" OpenRouter ","model":"google/gemini-2.5-flash-image-preview","dollarsPerImage":0.04}}"#,
        ),
    );
    let c = load(&ok.sources, no_env).unwrap();
    assert_eq!(c.artist.provider, "openrouter");
    assert_eq!(c.artist.dollars_per_image, Some(0.04));
    for (artist, field) in [
        (r#"{"provider":"midjourney"}"#, "artist.provider"),
        (
            r#"{"provider":"openrouter","dollarsPerImage":-1}"#,
            "artist.dollarsPerImage",
        ),
    ] {
        let f = files(
            Some(GLOBAL),
            Some(&format!(
                r#"{{"slack":{{"channelID":"C1"}},"artist":{artist}}}"#
            )),
        );
        let e = load(&f.sources, no_env).unwrap_err().to_string();
        assert!(e.contains(field), "{e}");
    }
}
