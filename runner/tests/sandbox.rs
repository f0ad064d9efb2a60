//! The sandbox's escape battery, driven through the real binary:
//! `codebutler-runner sandbox-exec --spec FILE -- bash -c '…'`, every outcome asserted from
//! the host.
//!
//! The fixture is what the controller sets up: a repository with a main checkout, a thread
//! worktree under `<repo>/.codebutler/branches/t` (the sandbox's worktree: a repository of
//! its own whose history comes from a base store of the base commit's ancestry, named in its
//! alternates) and another thread's worktree next to it with a commit of its own, a
//! repository config and a global config (`$HOME/.codebutler/config.json`) holding a token,
//! and API keys in the runner's environment.
//!
//! Every escape test must fail without the sandbox. To check that, run the suite with
//! `CODEBUTLER_SANDBOX_TEST_MODE=none` (the specs then say `"mode": "none"`): the escape
//! tests fail, the positive ones pass, and the fork bomb refuses to run at all.
//!
//! Nothing here is skipped: a kernel feature or tool the tests need that is missing makes
//! the test fail with an explanation.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeSet;
use std::fs;
use std::io::ErrorKind;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tempfile::TempDir;

const BIN: &str = env!("CARGO_BIN_EXE_codebutler-runner");
const SLACK_TOKEN: &str = "xoxb-must-not-leak";
const API_KEY: &str = "sk-or-must-not-leak";
const MAIN_ONLY: &str = "main-checkout-only-content";
const OTHER_ONLY: &str = "other-worktree-only-content";
const UNPUSHED_ONLY: &str = "the-persons-unpushed-work";
const TIMEOUT: Duration = Duration::from_secs(120);

fn sandbox_mode() -> &'static str {
    match std::env::var("CODEBUTLER_SANDBOX_TEST_MODE").as_deref() {
        Ok("none") => "none",
        _ => "enforce",
    }
}

fn git(dir: &Path, home: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .args(["-c", "user.name=Test", "-c", "user.email=test@example.com"])
        .args(args)
        .current_dir(dir)
        .env("HOME", home)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .output()
        .expect("git must be installed for the sandbox tests");
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

struct Fixture {
    _dir: TempDir,
    root: PathBuf,
    home: PathBuf,
    repo: PathBuf,
    worktree: PathBuf,
    other: PathBuf,
    /// The worktree's own `.git`.
    git_dir: PathBuf,
    /// The base store its history comes from (`<repo>/.codebutler/git/bases/<commit>`).
    store: PathBuf,
    /// The other thread's commit (only in the other worktree's own objects).
    other_commit: String,
    /// A commit on a branch of the person's in the main repository, never pushed.
    unpushed_commit: String,
}

struct Outcome {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

impl Outcome {
    fn all(&self) -> String {
        format!("{}\n{}", self.stdout, self.stderr)
    }

    fn assert_no_secret(&self) {
        for secret in [SLACK_TOKEN, API_KEY, MAIN_ONLY, OTHER_ONLY, UNPUSHED_ONLY] {
            assert!(
                !self.all().contains(secret),
                "{secret} leaked into the sandbox:\n{}",
                self.all()
            );
        }
    }
}

impl std::fmt::Debug for Outcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "exit {:?}\n--- stdout\n{}\n--- stderr\n{}",
            self.code, self.stdout, self.stderr
        )
    }
}

impl Fixture {
    fn new() -> Self {
        // Under the target directory rather than /tmp, as a real repository would be: the
        // sandbox's /tmp is a private tmpfs, so a repository under the host's /tmp would have
        // the directories leading to its git metadata recreated in that writable tmpfs.
        // A checkout that itself lives under /tmp (CI may clone there) falls back to
        // /var/tmp, which the sandbox does not shadow.
        let target_tmp = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"));
        let base = if target_tmp.starts_with("/tmp") {
            std::path::PathBuf::from("/var/tmp")
        } else {
            target_tmp.to_owned()
        };
        let dir = tempfile::Builder::new()
            .prefix("codebutler-sandbox-")
            .tempdir_in(base)
            .unwrap();
        let root = fs::canonicalize(dir.path()).unwrap();
        let home = root.join("home");
        fs::create_dir_all(home.join(".codebutler")).unwrap();
        fs::write(
            home.join(".codebutler/config.json"),
            format!(r#"{{"slack": {{"botToken": "{SLACK_TOKEN}"}}}}"#),
        )
        .unwrap();

        let repo = root.join("repo");
        fs::create_dir_all(&repo).unwrap();
        git(&repo, &home, &["init", "-q", "-b", "main"]);
        fs::write(repo.join("README.md"), "hello from the repository\n").unwrap();
        git(&repo, &home, &["add", "README.md"]);
        git(&repo, &home, &["commit", "-q", "-m", "initial commit"]);
        fs::write(
            repo.join(".git/info/exclude"),
            ".codebutler/\nmain-only.txt\n",
        )
        .unwrap();
        fs::write(repo.join("main-only.txt"), MAIN_ONLY).unwrap();
        fs::create_dir_all(repo.join(".codebutler/branches")).unwrap();
        fs::write(
            repo.join(".codebutler/config.json"),
            format!(r#"{{"openrouter": {{"apiKey": "{API_KEY}"}}}}"#),
        )
        .unwrap();

        // The person's own unpushed branch, which no thread may see.
        git(&repo, &home, &["checkout", "-q", "-b", "my-work"]);
        fs::write(repo.join("unpushed.txt"), UNPUSHED_ONLY).unwrap();
        git(&repo, &home, &["add", "unpushed.txt"]);
        git(&repo, &home, &["commit", "-q", "-m", "unpushed work"]);
        let unpushed_commit = git(&repo, &home, &["rev-parse", "HEAD"]);
        git(&repo, &home, &["checkout", "-q", "main"]);
        let base = git(&repo, &home, &["rev-parse", "main"]);

        // The base store: exactly the base commit's ancestry, as the controller packs it.
        let store = repo.join(".codebutler/git/bases").join(&base);
        fs::create_dir_all(store.join("objects/info")).unwrap();
        fs::create_dir_all(store.join("objects/pack")).unwrap();
        let mut pack = Command::new("git")
            .args(["pack-objects", "--revs", "-q"])
            .arg(store.join("objects/pack/pack"))
            .current_dir(&repo)
            .env("HOME", &home)
            .stdin(Stdio::piped())
            .spawn()
            .unwrap();
        std::io::Write::write_all(
            &mut pack.stdin.take().unwrap(),
            format!("{base}\n").as_bytes(),
        )
        .unwrap();
        assert!(pack.wait().unwrap().success());

        let thread = |name: &str| {
            let path = repo.join(".codebutler/branches").join(name);
            let branch = format!("codebutler/{name}");
            git(
                &repo,
                &home,
                &["init", "-q", "-b", &branch, path.to_str().unwrap()],
            );
            fs::write(
                path.join(".git/objects/info/alternates"),
                format!("{}\n", store.join("objects").display()),
            )
            .unwrap();
            git(
                &path,
                &home,
                &["update-ref", &format!("refs/heads/{branch}"), &base],
            );
            git(&path, &home, &["reset", "-q", "--hard"]);
            path
        };
        let worktree = thread("t");
        let other = thread("other");
        fs::write(other.join("other.txt"), OTHER_ONLY).unwrap();
        git(&other, &home, &["add", "other.txt"]);
        git(
            &other,
            &home,
            &["commit", "-q", "-m", "the other thread's work"],
        );
        let other_commit = git(&other, &home, &["rev-parse", "HEAD"]);
        Fixture {
            _dir: dir,
            root,
            home,
            repo,
            git_dir: worktree.join(".git"),
            worktree,
            other,
            store,
            other_commit,
            unpushed_commit,
        }
    }

    /// Writes a spec for the worktree with `overrides` merged in, and returns its path.
    fn spec(&self, overrides: Value) -> PathBuf {
        let mut spec = json!({
            "worktree": self.worktree,
            "mode": sandbox_mode(),
        });
        if let (Some(base), Some(extra)) = (spec.as_object_mut(), overrides.as_object()) {
            for (k, v) in extra {
                base.insert(k.clone(), v.clone());
            }
        }
        let path = self.root.join(format!(
            "spec-{}.json",
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos()
        ));
        fs::write(&path, serde_json::to_vec_pretty(&spec).unwrap()).unwrap();
        path
    }

    /// The runner command as the controller would start it: the host's environment plus
    /// secrets, `HOME` pointing at the global config.
    fn command(&self, spec: &Path, argv: &[&str]) -> Command {
        let mut cmd = Command::new(BIN);
        cmd.arg("sandbox-exec")
            .arg("--spec")
            .arg(spec)
            .arg("--")
            .args(argv)
            .current_dir(&self.root)
            .env("HOME", &self.home)
            .env("OPENROUTER_API_KEY", API_KEY)
            .env("SLACK_BOT_TOKEN", SLACK_TOKEN)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        cmd
    }

    fn run_argv(&self, overrides: Value, argv: &[&str]) -> Outcome {
        let spec = self.spec(overrides);
        finish(self.command(&spec, argv).spawn().unwrap(), TIMEOUT)
    }

    fn run_with(&self, overrides: Value, script: &str) -> Outcome {
        self.run_argv(overrides, &["bash", "-c", script])
    }

    fn run(&self, script: &str) -> Outcome {
        self.run_with(json!({}), script)
    }

    fn path(&self, p: &Path) -> String {
        p.to_str().unwrap().to_owned()
    }
}

/// Waits for `child` (killing it after `timeout`) and collects its output.
fn finish(child: Child, timeout: Duration) -> Outcome {
    let pid = child.id();
    let (tx, rx) = mpsc::channel();
    thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    let output: Output = match rx.recv_timeout(timeout) {
        Ok(out) => out.unwrap(),
        Err(_) => {
            let _ = Command::new("kill")
                .args(["-KILL", &pid.to_string()])
                .status();
            panic!("the sandboxed command did not finish within {timeout:?}");
        }
    };
    Outcome {
        code: output.status.code(),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    }
}

/// Tests whose attempt would harm the host without the sandbox refuse to run without it
/// (and so fail, as every escape test must when the sandbox is absent).
fn refuse_without_sandbox(what: &str) {
    assert_eq!(
        sandbox_mode(),
        "enforce",
        "refusing to run {what} without the sandbox"
    );
}

fn require_tool(path: &str) {
    assert!(
        Path::new(path).exists(),
        "this test needs {path} on the host (it is visible inside through /usr); install it"
    );
}

// ---------------------------------------------------------------------------------------
// What must work.

#[test]
fn worktree_is_readable_and_writable_and_git_reads_work() {
    let f = Fixture::new();
    let out = f.run(
        "set -e
         cat README.md
         echo from-the-sandbox > new.txt
         echo edited >> README.md
         git status --porcelain
         git log --oneline -1
         git diff --stat",
    );
    assert_eq!(out.code, Some(0), "{out:?}");
    assert!(out.stdout.contains("hello from the repository"), "{out:?}");
    assert!(out.stdout.contains("?? new.txt"), "{out:?}");
    assert!(out.stdout.contains(" M README.md"), "{out:?}");
    assert!(out.stdout.contains("initial commit"), "{out:?}");
    assert_eq!(
        fs::read_to_string(f.worktree.join("new.txt")).unwrap(),
        "from-the-sandbox\n"
    );
    assert!(
        fs::read_to_string(f.worktree.join("README.md"))
            .unwrap()
            .ends_with("edited\n")
    );
}

/// The thread's attachments directory of the fixture's repository, as the controller keeps
/// it, holding `api.log`.
fn attachments(f: &Fixture) -> PathBuf {
    let dir = f.repo.join(".codebutler/attachments/C1-1.1");
    fs::create_dir_all(&dir).unwrap();
    fs::write(dir.join("api.log"), "ERROR db: connection refused\n").unwrap();
    dir
}

/// The entries of `dir` on the host, sorted.
fn entries(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

#[test]
fn shared_files_are_read_only_in_the_worktree_and_files_added_later_appear() {
    let f = Fixture::new();
    let shared = attachments(&f);
    let ready = f.worktree.join("ready");
    let spec = f.spec(json!({ "attachments": shared }));
    // The run signals once it is inside, then waits for a file the host adds after that.
    let script = "cat .codebutler-attachments/api.log
         grep -c refused .codebutler-attachments/api.log
         echo tampered >> .codebutler-attachments/api.log || echo APPEND-REFUSED
         touch .codebutler-attachments/new.txt || echo CREATE-REFUSED
         rm -f .codebutler-attachments/api.log || echo REMOVE-REFUSED
         mv .codebutler-attachments moved || echo MOVE-REFUSED
         touch ready
         for _ in $(seq 600); do [ -e .codebutler-attachments/late.log ] && break; sleep 0.1; done
         cat .codebutler-attachments/late.log";
    let child = f.command(&spec, &["bash", "-c", script]).spawn().unwrap();
    let deadline = Instant::now() + TIMEOUT;
    while !ready.exists() && Instant::now() < deadline {
        thread::sleep(Duration::from_millis(50));
    }
    fs::write(shared.join("late.log"), "shared while the run goes on\n").unwrap();
    let out = finish(child, TIMEOUT);
    assert_eq!(out.code, Some(0), "{out:?}");
    assert!(
        out.stdout.contains("ERROR db: connection refused"),
        "{out:?}"
    );
    for refused in [
        "APPEND-REFUSED",
        "CREATE-REFUSED",
        "REMOVE-REFUSED",
        "MOVE-REFUSED",
    ] {
        assert!(out.stdout.contains(refused), "{refused}: {out:?}");
    }
    assert!(
        out.stdout.contains("shared while the run goes on"),
        "{out:?}"
    );
    // On the host: the shared files are as they were, nothing was added, and the worktree
    // holds only the empty mount point (git tracks no empty directory).
    assert_eq!(entries(&shared), ["api.log", "late.log"]);
    assert_eq!(
        fs::read_to_string(shared.join("api.log")).unwrap(),
        "ERROR db: connection refused\n"
    );
    let point = f.worktree.join(".codebutler-attachments");
    assert!(fs::symlink_metadata(&point).unwrap().is_dir());
    assert!(entries(&point).is_empty());
    assert!(!f.worktree.join("moved").exists());
}

#[test]
fn the_sandbox_reports_what_it_enforced() {
    if sandbox_mode() == "none" {
        panic!("no sandbox report without the sandbox");
    }
    let f = Fixture::new();
    let spec = f.spec(json!({}));
    let mut cmd = Command::new(BIN);
    cmd.args(["sandbox-exec", "--print-report", "--spec"])
        .arg(&spec)
        .args(["--", "true"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let out = finish(cmd.spawn().unwrap(), TIMEOUT);
    assert_eq!(out.code, Some(0), "{out:?}");
    let report: Value = serde_json::from_str(out.stderr.lines().last().unwrap()).unwrap();
    assert_eq!(report["mode"], "enforce");
    assert_eq!(report["network"], false, "{report}");
    assert!(report["landlockAbi"].as_i64().unwrap() >= 3, "{report}");
    assert!(report["seccompRules"].as_u64().unwrap() > 40, "{report}");
    // As root the pids cgroup is mandatory (RLIMIT_NPROC does not bind uid 0).
    if nix::unistd::getuid().is_root() {
        assert_eq!(report["cgroup"]["pids"]["status"], "applied", "{report}");
    }
}

#[test]
fn hostname_and_network_are_the_sandboxs_own() {
    let f = Fixture::new();
    let out = f.run("hostname; cat /proc/net/dev");
    assert_eq!(out.code, Some(0), "{out:?}");
    assert_eq!(out.stdout.lines().next(), Some("codebutler"), "{out:?}");
    let interfaces: Vec<&str> = out
        .stdout
        .lines()
        .skip(3)
        .filter_map(|l| l.split(':').next())
        .map(str::trim)
        .collect();
    assert_eq!(interfaces, vec!["lo"], "{out:?}");
}

#[test]
fn only_kept_descriptors_survive() {
    let f = Fixture::new();
    let spec = f.spec(json!({}));
    // fd 3 stands for the controller's socket (kept by default); fd 5 must be closed.
    let inner = format!(
        "exec 3</dev/null 5</dev/null; exec {BIN} sandbox-exec --spec {} -- \
         bash -c 'test -e /proc/self/fd/3 && echo fd3-open; test -e /proc/self/fd/5 && echo fd5-open; true'",
        spec.display()
    );
    let mut cmd = Command::new("bash");
    cmd.args(["-c", &inner])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let out = finish(cmd.spawn().unwrap(), TIMEOUT);
    assert_eq!(out.code, Some(0), "{out:?}");
    assert!(out.stdout.contains("fd3-open"), "{out:?}");
    assert!(!out.stdout.contains("fd5-open"), "{out:?}");
}

// ---------------------------------------------------------------------------------------
// Reading what the sandbox must not see.

fn assert_unreadable(f: &Fixture, path: &Path) {
    let out = f.run(&format!(
        "if cat '{0}'; then echo READABLE; else echo BLOCKED; fi",
        path.display()
    ));
    assert!(
        out.stdout.contains("BLOCKED"),
        "{} readable: {out:?}",
        path.display()
    );
    out.assert_no_secret();
}

#[test]
fn global_config_is_not_visible() {
    let f = Fixture::new();
    assert_unreadable(&f, &f.home.join(".codebutler/config.json"));
    let out = f.run(&format!(
        "ls -a '{}' || echo NO-HOME; ls -a /root || echo NO-ROOT",
        f.home.display()
    ));
    assert!(
        out.stdout.contains("NO-HOME") && out.stdout.contains("NO-ROOT"),
        "{out:?}"
    );
}

#[test]
fn repository_codebutler_directory_is_not_visible() {
    let f = Fixture::new();
    assert_unreadable(&f, &f.repo.join(".codebutler/config.json"));
}

#[test]
fn main_checkout_and_its_git_metadata_are_not_visible() {
    let f = Fixture::new();
    assert_unreadable(&f, &f.repo.join("main-only.txt"));
    assert_unreadable(&f, &f.repo.join("README.md"));
    assert_unreadable(&f, &f.repo.join(".git/config"));
    let out = f.run(&format!(
        "ls -a '{}'; test -d '{}' && echo MAIN-GIT-VISIBLE; test -d '{}/objects/pack' && echo STORE-VISIBLE",
        f.path(&f.repo),
        f.path(&f.repo.join(".git")),
        f.path(&f.store),
    ));
    assert!(!out.stdout.contains("MAIN-GIT-VISIBLE"), "{out:?}");
    assert!(out.stdout.contains("STORE-VISIBLE"), "{out:?}");
    assert!(!out.stdout.contains("main-only.txt"), "{out:?}");
    assert!(!out.stdout.contains("README.md"), "{out:?}");
}

#[test]
fn only_the_threads_own_history_is_visible() {
    let f = Fixture::new();
    // The thread's everyday git works on its history...
    let out = f.run(
        "set -e; git log --oneline; git blame README.md >/dev/null && echo BLAME-OK; \
         git status --porcelain; git branch -a; git stash list; echo DONE",
    );
    assert_eq!(out.code, Some(0), "{out:?}");
    assert!(out.stdout.contains("initial commit"), "{out:?}");
    assert!(out.stdout.contains("BLAME-OK"), "{out:?}");
    assert!(out.stdout.contains("codebutler/t"), "{out:?}");
    // ...but no other thread's commit, no branch or stash of the person's, no main config.
    assert!(!out.stdout.contains("my-work"), "{out:?}");
    assert!(!out.stdout.contains("codebutler/other"), "{out:?}");
    let out = f.run(&format!(
        "git cat-file -p {other} || echo NO-OTHER; git cat-file -p {unpushed} || echo NO-UNPUSHED; \
         git log --all --format=%s; grep -rl '{other_only}' /workspace {branches} 2>/dev/null; \
         git config --list --show-origin; true",
        other = f.other_commit,
        unpushed = f.unpushed_commit,
        other_only = OTHER_ONLY,
        branches = f.path(&f.repo.join(".codebutler/branches")),
    ));
    assert!(!out.stdout.contains("unpushed work"), "{out:?}");
    assert!(!out.stdout.contains("the other thread's work"), "{out:?}");
    assert!(out.stdout.contains("NO-OTHER"), "{out:?}");
    assert!(out.stdout.contains("NO-UNPUSHED"), "{out:?}");
    out.assert_no_secret();
    assert!(
        !out.stdout
            .contains(&f.repo.join(".git").display().to_string()),
        "{out:?}"
    );
}

#[test]
fn other_worktrees_are_not_visible() {
    let f = Fixture::new();
    assert_unreadable(&f, &f.other.join("other.txt"));
    assert_unreadable(&f, &f.other.join("README.md"));
}

#[test]
fn environment_is_exactly_the_allow_list() {
    let f = Fixture::new();
    let out = f.run_argv(json!({}), &["env"]);
    assert_eq!(out.code, Some(0), "{out:?}");
    out.assert_no_secret();
    let keys: BTreeSet<&str> = out
        .stdout
        .lines()
        .filter_map(|l| l.split_once('=').map(|(k, _)| k))
        .collect();
    let expected: BTreeSet<&str> = ["CARGO_TARGET_DIR", "HOME", "LANG", "PATH", "TERM"]
        .into_iter()
        .collect();
    assert_eq!(keys, expected, "{out:?}");
    assert!(out.stdout.contains("HOME=/tmp/home\n"), "{out:?}");
    assert!(out.stdout.contains("TERM=dumb\n"), "{out:?}");
}

#[test]
fn no_process_environment_inside_holds_a_token() {
    let f = Fixture::new();
    let out =
        f.run("sleep 5 & grep -l -r -s -e sk-or-must -e xoxb-must /proc/*/environ; echo grep-done");
    assert!(out.stdout.contains("grep-done"), "{out:?}");
    assert!(
        !out.stdout.contains("environ"),
        "a token is readable: {out:?}"
    );
    out.assert_no_secret();
}

#[test]
fn the_controllers_environ_is_not_reachable() {
    let f = Fixture::new();
    // A stand-in controller holding the secrets in its environment.
    let mut controller = Command::new("sleep")
        .arg("60")
        .env("OPENROUTER_API_KEY", API_KEY)
        .env("SLACK_BOT_TOKEN", SLACK_TOKEN)
        .spawn()
        .unwrap();
    let pid = controller.id();
    let out = f.run(&format!(
        "if cat /proc/{pid}/environ; then echo READABLE; else echo BLOCKED; fi; \
         ls /proc/{pid} >/dev/null 2>&1 && echo PID-VISIBLE; true"
    ));
    let _ = controller.kill();
    let _ = controller.wait();
    assert!(out.stdout.contains("BLOCKED"), "{out:?}");
    assert!(!out.stdout.contains("PID-VISIBLE"), "{out:?}");
    out.assert_no_secret();
}

// ---------------------------------------------------------------------------------------
// Writing outside the worktree.

#[test]
fn writes_outside_the_worktree_fail_and_change_nothing() {
    let f = Fixture::new();
    let tag = format!("codebutler-escape-{}", std::process::id());
    let files = [
        f.repo.join("README.md"),
        f.home.join(".codebutler/config.json"),
        f.repo.join(".codebutler/config.json"),
        f.other.join("README.md"),
        PathBuf::from("/etc/passwd"),
    ];
    let before: Vec<Vec<u8>> = files.iter().map(|p| fs::read(p).unwrap()).collect();
    let dirs = [
        f.repo.clone(),
        f.home.clone(),
        f.other.clone(),
        PathBuf::from("/usr"),
        PathBuf::from("/etc"),
        PathBuf::from("/"),
        PathBuf::from("/proc"),
        PathBuf::from("/dev"),
    ];
    let mut script = String::new();
    for p in &files {
        // Opening for append is the write attempt; nothing is written even if it succeeds.
        script.push_str(&format!(
            "if : >> '{0}'; then echo 'OPENED {0}'; fi\n",
            p.display()
        ));
    }
    for d in &dirs {
        script.push_str(&format!(
            "if touch '{0}/{tag}'; then echo 'CREATED {0}'; fi\n",
            d.display()
        ));
    }
    // /tmp inside is private: writing works, but not to the host's /tmp.
    script.push_str(&format!("echo private > /tmp/{tag} && echo TMP-OK\n"));
    let out = f.run(&script);
    let leftovers: Vec<PathBuf> = dirs
        .iter()
        .map(|d| d.join(&tag))
        .chain([PathBuf::from("/tmp").join(&tag)])
        .filter(|p| p.exists())
        .collect();
    for p in &leftovers {
        let _ = fs::remove_file(p);
    }
    assert!(!out.stdout.contains("OPENED"), "{out:?}");
    assert!(!out.stdout.contains("CREATED"), "{out:?}");
    assert!(out.stdout.contains("TMP-OK"), "{out:?}");
    assert!(
        leftovers.is_empty(),
        "files appeared on the host: {leftovers:?}"
    );
    for (p, b) in files.iter().zip(&before) {
        assert_eq!(&fs::read(p).unwrap(), b, "{} changed", p.display());
    }
}

/// A host directory a run planted a link to: writable on the host, holding a secret.
fn victim(f: &Fixture) -> PathBuf {
    let victim = f.root.join("victim");
    fs::create_dir_all(&victim).unwrap();
    fs::write(victim.join("secret.txt"), MAIN_ONLY).unwrap();
    victim
}

#[test]
fn a_linked_attachments_mount_point_neither_exposes_nor_covers_its_target() {
    let f = Fixture::new();
    let shared = attachments(&f);
    let victim = victim(&f);
    fs::create_dir_all(f.worktree.join("src")).unwrap();
    fs::write(f.worktree.join("src/lib.rs"), "pub fn kept() {}\n").unwrap();
    let point = f.worktree.join(".codebutler-attachments");
    // An absolute link to a host directory, then a relative one into the worktree itself.
    for target in [victim.clone(), PathBuf::from("src")] {
        let _ = fs::remove_dir(&point);
        std::os::unix::fs::symlink(&target, &point).unwrap();
        let out = f.run_with(
            json!({ "attachments": shared }),
            &format!(
                "ls .codebutler-attachments
                 cat '{victim}/secret.txt' .codebutler-attachments/secret.txt
                 cat src/lib.rs
                 touch .codebutler-attachments/planted || echo CREATE-REFUSED",
                victim = victim.display()
            ),
        );
        assert_eq!(out.code, Some(0), "{}: {out:?}", target.display());
        out.assert_no_secret();
        assert!(out.stdout.contains("api.log"), "{out:?}");
        assert!(out.stdout.contains("pub fn kept"), "{out:?}");
        assert!(out.stdout.contains("CREATE-REFUSED"), "{out:?}");
        // From the host: the link became an empty directory of the worktree, and neither
        // its old target nor the shared files changed.
        let meta = fs::symlink_metadata(&point).unwrap();
        assert!(meta.is_dir() && !meta.file_type().is_symlink());
        assert!(entries(&point).is_empty());
        assert_eq!(entries(&victim), ["secret.txt"]);
        assert_eq!(entries(&f.worktree.join("src")), ["lib.rs"]);
        assert_eq!(entries(&shared), ["api.log"]);
    }
}

#[test]
fn a_filled_attachments_mount_point_is_refused_and_kept() {
    let f = Fixture::new();
    let shared = attachments(&f);
    let point = f.worktree.join(".codebutler-attachments");
    fs::create_dir_all(&point).unwrap();
    fs::write(point.join("left.txt"), "left by an earlier run\n").unwrap();
    let out = f.run_with(json!({ "attachments": shared }), "echo RAN");
    assert_eq!(out.code, Some(125), "{out:?}");
    assert!(!out.stdout.contains("RAN"), "{out:?}");
    assert!(
        out.stderr.contains("sandbox step `mount` failed")
            && out.stderr.contains(".codebutler-attachments is not empty"),
        "{out:?}"
    );
    assert_eq!(
        fs::read_to_string(point.join("left.txt")).unwrap(),
        "left by an earlier run\n"
    );
    assert_eq!(entries(&shared), ["api.log"]);
}

#[test]
fn root_owned_kernel_knobs_are_not_writable() {
    let f = Fixture::new();
    let out = f.run(
        "for k in /proc/sys/kernel/core_pattern /proc/sys/vm/drop_caches /proc/sysrq-trigger; do
           if : >> $k; then echo OPENED $k; fi
         done; true",
    );
    assert!(!out.stdout.contains("OPENED"), "{out:?}");
}

#[test]
fn git_hooks_config_and_refs_are_protected() {
    let f = Fixture::new();
    let config_before = fs::read(f.git_dir.join("config")).unwrap();
    let alternates = f.git_dir.join("objects/info/alternates");
    let alternates_before = fs::read(&alternates).unwrap();
    let main_config_before = fs::read(f.repo.join(".git/config")).unwrap();
    let own_before = git(
        &f.worktree,
        &f.home,
        &["rev-parse", "refs/heads/codebutler/t"],
    );
    let main_before = git(&f.repo, &f.home, &["rev-parse", "refs/heads/main"]);
    let out = f.run(&format!(
        r#"hook='#!/bin/sh
echo pwned > /tmp/pwned'
if mkdir -p .git/hooks && printf '%s\n' "$hook" > .git/hooks/post-checkout; then echo HOOK-WORKTREE; fi
if git config core.hooksPath /tmp/x; then echo CONFIG-SET; fi
if echo '[core] fsmonitor = /tmp/x' >> .git/config; then echo CONFIG-APPENDED; fi
if echo '/etc' >> .git/objects/info/alternates; then echo ALTERNATES-CHANGED; fi
if touch '{store}/objects/planted'; then echo STORE-WRITTEN; fi
if git update-ref refs/heads/codebutler/t HEAD~0^{{tree}} 2>/dev/null || git commit --allow-empty -qm x; then echo REF-OWN; fi
if git branch other-branch HEAD; then echo REF-NEW; fi
if rm -rf .git; then echo DOTGIT-REMOVED; fi
if mv .git .git-moved; then echo DOTGIT-MOVED; fi
git status --porcelain >/dev/null && echo STATUS-OK"#,
        store = f.path(&f.store),
    ));
    for marker in [
        "HOOK-WORKTREE",
        "CONFIG-SET",
        "CONFIG-APPENDED",
        "ALTERNATES-CHANGED",
        "STORE-WRITTEN",
        "REF-OWN",
        "REF-NEW",
        "DOTGIT-REMOVED",
        "DOTGIT-MOVED",
    ] {
        assert!(!out.stdout.contains(marker), "{marker}: {out:?}");
    }
    assert!(out.stdout.contains("STATUS-OK"), "{out:?}");
    assert!(!f.git_dir.join("hooks/post-checkout").exists());
    assert!(!f.store.join("objects/planted").exists());
    assert_eq!(fs::read(f.git_dir.join("config")).unwrap(), config_before);
    assert_eq!(fs::read(&alternates).unwrap(), alternates_before);
    assert_eq!(
        fs::read(f.repo.join(".git/config")).unwrap(),
        main_config_before
    );
    assert_eq!(
        git(
            &f.worktree,
            &f.home,
            &["rev-parse", "refs/heads/codebutler/t"]
        ),
        own_before
    );
    assert_eq!(
        git(&f.repo, &f.home, &["rev-parse", "refs/heads/main"]),
        main_before
    );
}

// ---------------------------------------------------------------------------------------
// Network, signals, ptrace, namespaces, mounts.

#[test]
fn tcp_to_the_hosts_loopback_fails() {
    let f = Fixture::new();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let out = f.run(&format!(
        "if exec 3<>/dev/tcp/127.0.0.1/{port}; then echo CONNECTED; else echo REFUSED; fi"
    ));
    assert!(out.stdout.contains("REFUSED"), "{out:?}");
    listener.set_nonblocking(true).unwrap();
    match listener.accept() {
        Err(e) if e.kind() == ErrorKind::WouldBlock => {}
        other => panic!("the host listener was reached: {other:?}"),
    }
}

#[test]
fn only_unix_sockets_can_be_created() {
    require_tool("/usr/bin/python3");
    let f = Fixture::new();
    let out = f.run(
        r#"python3 - <<'EOF'
import socket
kinds = {"AF_PACKET": socket.SOCK_RAW, "AF_UNIX": socket.SOCK_STREAM}
for name in ["AF_INET", "AF_INET6", "AF_NETLINK", "AF_PACKET", "AF_UNIX"]:
    try:
        socket.socket(getattr(socket, name), kinds.get(name, socket.SOCK_DGRAM)).close()
        print(name, "created")
    except OSError as e:
        print(name, "errno", e.errno)
socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET | socket.SOCK_CLOEXEC).close()
print("unix seqpacket created")
a, b = socket.socketpair()
print("socketpair unix created")
try:
    socket.socketpair(socket.AF_INET)
    print("socketpair inet created")
except OSError as e:
    print("socketpair inet errno", e.errno)
EOF"#,
    );
    assert_eq!(out.code, Some(0), "{out:?}");
    for family in ["AF_INET", "AF_INET6", "AF_NETLINK", "AF_PACKET"] {
        assert!(
            out.stdout.contains(&format!("{family} errno 1\n")),
            "{family}: {out:?}"
        );
    }
    assert!(out.stdout.contains("AF_UNIX created"), "{out:?}");
    assert!(out.stdout.contains("unix seqpacket created"), "{out:?}");
    assert!(out.stdout.contains("socketpair unix created"), "{out:?}");
    assert!(!out.stdout.contains("socketpair inet created"), "{out:?}");
}

/// A Python script that tries an `AF_INET` socket bound on 127.0.0.1, then each family.
const INET_PROBE: &str = r#"python3 - <<'EOF'
import socket
try:
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.bind(("127.0.0.1", 0))
    s.listen(1)
    print("inet bound", s.getsockname()[1])
except OSError as e:
    print("inet errno", e.errno)
for name in ["AF_INET6", "AF_NETLINK", "AF_PACKET"]:
    try:
        socket.socket(getattr(socket, name), socket.SOCK_DGRAM if name != "AF_PACKET" else socket.SOCK_RAW).close()
        print(name, "created")
    except OSError as e:
        print(name, "errno", e.errno)
EOF"#;

#[test]
fn without_network_inet_sockets_are_refused() {
    require_tool("/usr/bin/python3");
    let f = Fixture::new();
    // Absent and an explicit `false` are the same: no network.
    for overrides in [json!({}), json!({"network": false})] {
        let out = f.run_with(overrides.clone(), INET_PROBE);
        assert_eq!(out.code, Some(0), "{overrides}: {out:?}");
        assert!(
            out.stdout.contains("inet errno 1\n"),
            "{overrides}: {out:?}"
        );
        assert!(out.stdout.contains("AF_INET6 errno 1\n"), "{out:?}");
    }
}

#[test]
fn with_network_inet_sockets_work_and_nothing_else_changes() {
    require_tool("/usr/bin/python3");
    let f = Fixture::new();
    let spec = json!({"network": true});
    let out = f.run_with(spec.clone(), INET_PROBE);
    assert_eq!(out.code, Some(0), "{out:?}");
    assert!(out.stdout.contains("inet bound "), "{out:?}");
    assert!(out.stdout.contains("AF_INET6 created"), "{out:?}");
    // Only the inet families are added.
    for family in ["AF_NETLINK", "AF_PACKET"] {
        assert!(
            out.stdout.contains(&format!("{family} errno 1\n")),
            "{family}: {out:?}"
        );
    }
    // It is the host's network: a listener on the host's loopback is reached.
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let out = f.run_with(
        spec.clone(),
        &format!(
            "if exec 3<>/dev/tcp/127.0.0.1/{port}; then echo CONNECTED; else echo REFUSED; fi"
        ),
    );
    assert!(out.stdout.contains("CONNECTED"), "{out:?}");
    // Everything else is the sandbox as always: own hostname, no secrets, no main
    // checkout, no config, read-only outside the worktree, a clean environment.
    let out = f.run_with(
        spec,
        &format!(
            "hostname; env; cat {main} {config} 2>&1; touch {outside} 2>&1 || echo RO-OK; \
             echo inside > in-worktree.txt && echo RW-OK",
            main = f.path(&f.repo.join("main-only.txt")),
            config = f.path(&f.home.join(".codebutler/config.json")),
            outside = f.path(&f.root.join("planted")),
        ),
    );
    assert_eq!(out.stdout.lines().next(), Some("codebutler"), "{out:?}");
    out.assert_no_secret();
    assert!(!out.stdout.contains(SLACK_TOKEN), "{out:?}");
    assert!(
        out.stdout.contains("RO-OK") && out.stdout.contains("RW-OK"),
        "{out:?}"
    );
    assert!(!f.root.join("planted").exists());
    assert!(f.worktree.join("in-worktree.txt").is_file());
}

#[test]
fn a_coder_run_never_gets_the_network() {
    let f = Fixture::new();
    let spec = json!({"worktree": f.worktree, "network": true}).to_string();
    let out = Command::new(BIN)
        .args(["run", "--spec-json", &spec])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(125), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("refusing a Coder run"), "{stderr}");
}

#[test]
fn terminal_input_cannot_be_injected() {
    require_tool("/usr/bin/python3");
    let f = Fixture::new();
    // stdin is /dev/null: without the filter the ioctl fails with ENOTTY (25), with it EPERM.
    let out = f.run(
        r#"python3 -c '
import fcntl, termios
try:
    fcntl.ioctl(0, termios.TIOCSTI, b"x")
    print("INJECTED")
except OSError as e:
    print("errno", e.errno)
'"#,
    );
    assert!(out.stdout.contains("errno 1\n"), "{out:?}");
}

#[test]
fn host_processes_cannot_be_signalled() {
    let f = Fixture::new();
    let mut victim = Command::new("sleep").arg("60").spawn().unwrap();
    let pid = victim.id();
    let out = f.run(&format!(
        "kill -0 {pid}; echo probe=$?; kill -TERM {pid}; echo term=$?"
    ));
    let still_running = victim.try_wait().unwrap().is_none();
    let _ = victim.kill();
    let _ = victim.wait();
    assert!(out.stdout.contains("probe=1"), "{out:?}");
    assert!(out.stdout.contains("term=1"), "{out:?}");
    assert!(still_running, "the host process was killed: {out:?}");
}

#[test]
fn ptrace_is_refused() {
    require_tool("/usr/bin/strace");
    let f = Fixture::new();
    let out =
        f.run("strace -f true; echo strace=$?; grep -E '^(Seccomp|NoNewPrivs):' /proc/self/status");
    assert!(!out.stdout.contains("strace=0"), "{out:?}");
    assert!(out.stderr.contains("Operation not permitted"), "{out:?}");
    assert!(out.stdout.contains("Seccomp:\t2"), "{out:?}");
    assert!(out.stdout.contains("NoNewPrivs:\t1"), "{out:?}");
}

#[test]
fn new_namespaces_and_mounts_are_refused() {
    let f = Fixture::new();
    let out = f.run(
        "unshare -U true; echo user=$?
         unshare -m true; echo mnt=$?
         unshare -n true; echo net=$?
         mkdir -p /tmp/y && mount -t tmpfs x /tmp/y && umount /tmp/y; echo mount=$?
         mount --bind /usr /tmp/y && umount /tmp/y; echo bind=$?
         chroot / true; echo chroot=$?",
    );
    for probe in ["user", "mnt", "net", "mount", "bind", "chroot"] {
        assert!(
            !out.stdout.contains(&format!("{probe}=0")),
            "{probe} succeeded: {out:?}"
        );
        assert!(out.stdout.contains(&format!("{probe}=")), "{out:?}");
    }
}

#[test]
fn every_capability_is_dropped() {
    let f = Fixture::new();
    let out = f.run("grep -E '^Cap(Inh|Prm|Eff|Bnd|Amb):' /proc/self/status");
    assert_eq!(out.code, Some(0), "{out:?}");
    let lines: Vec<&str> = out.stdout.lines().collect();
    assert_eq!(lines.len(), 5, "{out:?}");
    for l in lines {
        assert!(l.ends_with("0000000000000000"), "{l}: {out:?}");
    }
}

// ---------------------------------------------------------------------------------------
// Unix sockets: the host's are out of reach, the sandbox's own work.

/// A directory the test creates on the host (under a system path), removed when dropped.
struct HostDir(PathBuf);

impl HostDir {
    fn new(parent: &str) -> Self {
        static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir = Path::new(parent).join(format!("codebutler-test-{}-{n}", std::process::id()));
        fs::create_dir_all(&dir)
            .unwrap_or_else(|e| panic!("create {} (the test runs as root): {e}", dir.display()));
        HostDir(dir)
    }
}

impl Drop for HostDir {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

/// Where a host process may leave a socket the sandbox sees: two system directories, a
/// `readOnly` path and the worktree's own `.git` (where `git fsmonitor--daemon` would
/// listen; read-only like the base store, whose path is too long for a socket address; the
/// main repository's `.git` is not in the sandbox at all). Returns the directories to
/// remove, the spec's `readOnly` override and the socket paths (named `name`).
fn host_socket_places(f: &Fixture, name: &str) -> (Vec<HostDir>, Value, Vec<(PathBuf, String)>) {
    let dirs = vec![HostDir::new("/usr/local/share"), HostDir::new("/etc")];
    let toolchain = f.root.join("toolchain");
    fs::create_dir_all(&toolchain).unwrap();
    let mut paths: Vec<(PathBuf, String)> = dirs
        .iter()
        .map(|d| d.0.join(name))
        .chain([toolchain.join(name)])
        .map(|p| {
            let inside = f.path(&p);
            (p, inside)
        })
        .collect();
    // The worktree's `.git` is seen at the mount point inside.
    paths.push((f.git_dir.join(name), format!("/workspace/.git/{name}")));
    (dirs, json!({"readOnly": [toolchain]}), paths)
}

fn assert_never_accepted(listeners: &[(PathBuf, std::os::unix::net::UnixListener)], out: &Outcome) {
    for (path, l) in listeners {
        l.set_nonblocking(true).unwrap();
        match l.accept() {
            Err(e) if e.kind() == ErrorKind::WouldBlock => {}
            other => panic!(
                "the host socket {} was reached: {other:?}\n{out:?}",
                path.display()
            ),
        }
    }
}

/// Tries each socket of argv five ways; one line per attempt.
const CONNECT_PROBE: &str = r#"
import os, socket, sys
def attempt(label, path, blocking=True):
    c = socket.socket(socket.AF_UNIX)
    c.setblocking(blocking)
    try:
        c.connect(path)
        print(label, "CONNECTED")
    except OSError as e:
        print(label, "errno", e.errno)
for i, p in enumerate(sys.argv[1:]):
    attempt(f"{i} absolute", p)
    attempt(f"{i} non-blocking", p, blocking=False)
    here = os.getcwd()
    os.chdir(os.path.dirname(p))
    attempt(f"{i} relative", os.path.basename(p))
    os.chdir(here)
    os.symlink(p, f"link{i}.sock")
    attempt(f"{i} symlink in the worktree", f"link{i}.sock")
    os.symlink(p, f"/tmp/link{i}.sock")
    attempt(f"{i} symlink in /tmp", f"/tmp/link{i}.sock")
    fd = os.open(p, os.O_PATH)
    attempt(f"{i} through /proc/self/fd", f"/proc/self/fd/{fd}")
"#;

#[test]
fn host_unix_sockets_under_mounted_paths_cannot_be_connected() {
    require_tool("/usr/bin/python3");
    let f = Fixture::new();
    let (_dirs, read_only, paths) = host_socket_places(&f, "host.sock");
    let listeners: Vec<_> = paths
        .iter()
        .map(|(p, _)| {
            (
                p.clone(),
                std::os::unix::net::UnixListener::bind(p).unwrap(),
            )
        })
        .collect();
    let mut argv = vec!["python3", "-c", CONNECT_PROBE];
    argv.extend(paths.iter().map(|(_, inside)| inside.as_str()));
    let mut expected = String::new();
    for i in 0..paths.len() {
        for how in [
            "absolute",
            "non-blocking",
            "relative",
            "symlink in the worktree",
            "symlink in /tmp",
            "through /proc/self/fd",
        ] {
            // EACCES: the socket is not on the worktree, /tmp or /dev/shm.
            expected.push_str(&format!("{i} {how} errno 13\n"));
        }
    }
    // With the network too (the worktree preparation): the same.
    for network in [false, true] {
        let mut spec = read_only.clone();
        spec["network"] = json!(network);
        for i in 0..paths.len() {
            let _ = fs::remove_file(f.worktree.join(format!("link{i}.sock")));
        }
        let out = f.run_argv(spec, &argv);
        assert_eq!(out.code, Some(0), "network {network}: {out:?}");
        assert_eq!(out.stdout, expected, "network {network}: {out:?}");
        assert_never_accepted(&listeners, &out);
    }
}

#[test]
fn host_datagram_sockets_receive_nothing() {
    require_tool("/usr/bin/python3");
    let f = Fixture::new();
    let (_dirs, read_only, paths) = host_socket_places(&f, "host.dgram");
    let receivers: Vec<_> = paths
        .iter()
        .map(|(p, _)| {
            let r = std::os::unix::net::UnixDatagram::bind(p).unwrap();
            r.set_nonblocking(true).unwrap();
            (p.clone(), r)
        })
        .collect();
    let script = r#"
import socket, sys
def attempt(label, make, send=lambda s, p: s.sendto(b"escaped", p)):
    try:
        s = make()
        for p in sys.argv[1:]:
            send(s, p)
        print(label, "SENT")
    except OSError as e:
        print(label, "errno", e.errno)
U = socket.AF_UNIX
pairs = []
def pair(kind):
    pairs.append(socket.socketpair(U, kind))
    return pairs[-1][0]
attempt("datagram", lambda: socket.socket(U, socket.SOCK_DGRAM))
attempt("datagram sendmsg", lambda: socket.socket(U, socket.SOCK_DGRAM),
        lambda s, p: s.sendmsg([b"escaped"], [], 0, p))
attempt("raw (a datagram socket to the kernel)", lambda: socket.socket(U, socket.SOCK_RAW))
attempt("datagram pair", lambda: pair(socket.SOCK_DGRAM))
attempt("stream", lambda: socket.socket(U, socket.SOCK_STREAM))
attempt("seqpacket", lambda: socket.socket(U, socket.SOCK_SEQPACKET))
attempt("connected stream", lambda: pair(socket.SOCK_STREAM))
attempt("connected seqpacket sendmsg", lambda: pair(socket.SOCK_SEQPACKET),
        lambda s, p: s.sendmsg([b"escaped"], [], 0, p))
"#;
    let mut argv = vec!["python3", "-c", script];
    argv.extend(paths.iter().map(|(_, inside)| inside.as_str()));
    for network in [false, true] {
        let mut spec = read_only.clone();
        spec["network"] = json!(network);
        let out = f.run_argv(spec, &argv);
        assert_eq!(out.code, Some(0), "network {network}: {out:?}");
        // Datagram sockets cannot be made (EPERM); a stream or seqpacket socket refuses a
        // destination (EOPNOTSUPP unconnected, EISCONN connected) or ignores it and sends
        // to its peer (a connected seqpacket socket).
        assert_eq!(
            out.stdout,
            "datagram errno 1\n\
             datagram sendmsg errno 1\n\
             raw (a datagram socket to the kernel) errno 1\n\
             datagram pair errno 1\n\
             stream errno 95\n\
             seqpacket errno 107\n\
             connected stream errno 106\n\
             connected seqpacket sendmsg SENT\n",
            "network {network}: {out:?}"
        );
        for (path, r) in &receivers {
            let mut buf = [0u8; 64];
            match r.recv_from(&mut buf) {
                Err(e) if e.kind() == ErrorKind::WouldBlock => {}
                other => panic!("{} received {other:?}: {out:?}", path.display()),
            }
        }
    }
}

#[test]
fn racing_the_address_cannot_redirect_a_connect() {
    require_tool("/usr/bin/python3");
    let f = Fixture::new();
    let dir = HostDir::new("/usr/local/share");
    let host = dir.0.join("host.sock");
    let listener = std::os::unix::net::UnixListener::bind(&host).unwrap();
    // Two races, each between an allowed socket (a server inside, in /tmp) and the host's:
    // a thread rewriting the address buffer while `connect` runs in another, and a process
    // swapping a symlink in the worktree. Each runs until both targets were seen.
    let script = r#"
import ctypes, os, socket, struct, sys, threading, time
host = sys.argv[1].encode()
ok = b"/tmp/ok.sock"
server = socket.socket(socket.AF_UNIX)
server.bind(ok)
server.listen(128)
def accept():
    while True:
        server.accept()[0].close()
threading.Thread(target=accept, daemon=True).start()

def client():
    # Bounded, so that a full backlog (the host's, were it reachable) cannot hang the test.
    s = socket.socket(socket.AF_UNIX)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, struct.pack("ll", 1, 0))
    return s

def race(connect):
    counts = {"ok": 0, "refused": 0}
    others = []
    start = time.time()
    while time.time() - start < 10 and (
        counts["ok"] == 0 or counts["refused"] == 0 or sum(counts.values()) + len(others) < 300
    ):
        e = connect()
        if e in (0, 13):
            counts["ok" if e == 0 else "refused"] += 1
        else:
            others.append(e)
    return f"{counts['ok'] > 0} {counts['refused'] > 0} {sorted(set(others))}"

libc = ctypes.CDLL(None, use_errno=True)
def addr(p):
    return struct.pack("H", socket.AF_UNIX) + p + b"\0" * (108 - len(p))
A, B = addr(ok), addr(host)
buf = ctypes.create_string_buffer(A, 110)
stop = False
def flip():
    while not stop:
        ctypes.memmove(buf, B, 110)
        ctypes.memmove(buf, A, 110)
threading.Thread(target=flip, daemon=True).start()
def connect_buffer():
    s = client()
    rc = libc.connect(s.fileno(), buf, 110)
    e = 0 if rc == 0 else ctypes.get_errno()
    s.close()
    return e
print("memory", race(connect_buffer))
stop = True

pid = os.fork()
if pid == 0:
    while True:
        for target in (ok, host):
            os.symlink(target, b"flip.tmp")
            os.rename(b"flip.tmp", b"flip.sock")
while not os.path.lexists("flip.sock"):
    time.sleep(0.001)
def connect_link():
    s = client()
    try:
        s.connect("flip.sock")
        return 0
    except OSError as e:
        return e.errno
    finally:
        s.close()
print("symlink", race(connect_link))
os.kill(pid, 9)
"#;
    let out = f.run_argv(
        json!({}),
        &["python3", "-c", script, host.to_str().unwrap()],
    );
    assert_eq!(out.code, Some(0), "{out:?}");
    // Both targets were hit (the races ran), and nothing else happened but, in the memory
    // race, `ENOENT` (2): PID 1 may copy the buffer while the other thread is half-way
    // through rewriting it, and that torn address names a file that does not exist (such
    // as `/tmp/local/share/…`). A torn copy is a third address, checked and connected as
    // copied; with the two addresses the same, no `ENOENT` ever comes.
    let memory_ok = ["memory True True []\n", "memory True True [2]\n"]
        .iter()
        .any(|memory| out.stdout == format!("{memory}symlink True True []\n"));
    assert!(memory_ok, "{out:?}");
    assert_never_accepted(&[(host, listener)], &out);
}

#[test]
fn host_abstract_sockets_stay_out_of_reach() {
    // Not an escape of today's code (Landlock's scope and the network namespace already
    // hold): a guard that PID 1, which now performs every connect, is held to them too.
    use std::os::linux::net::SocketAddrExt;
    require_tool("/usr/bin/python3");
    let f = Fixture::new();
    let name = format!("codebutler-test-{}", std::process::id());
    let addr = std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes()).unwrap();
    let listener = std::os::unix::net::UnixListener::bind_addr(&addr).unwrap();
    let script = format!(
        r#"
import socket
s = socket.socket(socket.AF_UNIX)
try:
    s.connect("\0{name}")
    print("CONNECTED")
except OSError as e:
    print("errno", e.errno)
"#
    );
    // Without the network the name does not exist in the sandbox's network namespace
    // (ECONNREFUSED); with it, Landlock refuses (EPERM).
    for (network, expected) in [(false, "errno 111\n"), (true, "errno 1\n")] {
        let out = f.run_argv(json!({"network": network}), &["python3", "-c", &script]);
        assert_eq!(out.stdout, expected, "network {network}: {out:?}");
        assert_never_accepted(
            &[(
                PathBuf::from(format!("@{name}")),
                listener.try_clone().unwrap(),
            )],
            &out,
        );
    }
}

#[test]
fn unix_servers_inside_the_sandbox_keep_working() {
    require_tool("/usr/bin/python3");
    let f = Fixture::new();
    let script = r#"
import os, signal, socket, struct, threading, time
U = socket.AF_UNIX
def report(label, f):
    try:
        r = f()
        print(label, "ok" if r is None else r)
    except OSError as e:
        print(label, "errno", e.errno)

def server(addr, kind=socket.SOCK_STREAM):
    s = socket.socket(U, kind)
    s.bind(addr)
    s.listen(16)
    def loop():
        while True:
            c = s.accept()[0]
            c.sendall(b"pong:" + c.recv(64))
            c.close()
    threading.Thread(target=loop, daemon=True).start()

def ping(addr, kind=socket.SOCK_STREAM):
    c = socket.socket(U, kind)
    c.connect(addr)
    c.sendall(b"ping")
    r = c.recv(64).decode()
    c.close()
    return r

server("srv.sock")
report("worktree, relative", lambda: ping("srv.sock"))
report("worktree, absolute", lambda: ping(os.getcwd() + "/srv.sock"))
os.mkdir("sub")
os.chdir("sub")
report("worktree, from a subdirectory", lambda: ping("../srv.sock"))
os.chdir("..")
server("/tmp/srv.sock")
report("tmp", lambda: ping("/tmp/srv.sock"))
server("/dev/shm/srv.sock")
report("dev/shm", lambda: ping("/dev/shm/srv.sock"))
server("/tmp/seq.sock", socket.SOCK_SEQPACKET)
report("seqpacket", lambda: ping("/tmp/seq.sock", socket.SOCK_SEQPACKET))
server("\0codebutler-inside")
report("abstract", lambda: ping("\0codebutler-inside"))
os.symlink("/tmp/srv.sock", "link.sock")
report("symlink in the worktree to /tmp", lambda: ping("link.sock"))
fd = os.open("/tmp/srv.sock", os.O_PATH)
report("through /proc/self/fd", lambda: ping(f"/proc/self/fd/{fd}"))
def nonblocking(path="/tmp/srv.sock"):
    c = socket.socket(U)
    c.setblocking(False)
    c.connect(path)
report("non-blocking", nonblocking)
report("missing", lambda: ping("/tmp/none.sock"))
open("plain.txt", "w").close()
report("not a socket", lambda: ping("plain.txt"))
report("wrong type", lambda: ping("/tmp/seq.sock"))
def pass_fd():
    a, b = socket.socketpair()
    r, w = os.pipe()
    socket.send_fds(a, [b"x"], [w])
    fds = socket.recv_fds(b, 1, 1)[1]
    os.write(fds[0], b"y")
    return os.read(r, 1).decode()
report("descriptor passing", pass_fd)

# A full listen backlog: a non-blocking connect gets EAGAIN, a blocking one waits (bounded
# by SO_SNDTIMEO) and completes once the server accepts.
full = socket.socket(U)
full.bind("/tmp/full.sock")
full.listen(0)
queued = []
while True:
    c = socket.socket(U)
    c.setblocking(False)
    try:
        c.connect("/tmp/full.sock")
        queued.append(c)
    except BlockingIOError:
        break
report("full backlog, non-blocking", lambda: nonblocking("/tmp/full.sock"))
def timed():
    c = socket.socket(U)
    c.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, struct.pack("ll", 0, 200000))
    c.connect("/tmp/full.sock")
report("full backlog, with a send timeout", timed)
result = {}
def blocking():
    c = socket.socket(U)
    try:
        c.connect("/tmp/full.sock")
        result["r"] = "ok"
    except OSError as e:
        result["r"] = f"errno {e.errno}"
    queued.append(c)
t = threading.Thread(target=blocking)
t.start()
time.sleep(0.3)
print("full backlog, blocking: waits", t.is_alive())
full.accept()
t.join(10)
print("full backlog, blocking: after an accept", result.get("r"))
pid = os.fork()
if pid == 0:
    socket.socket(U).connect("/tmp/full.sock")
    os._exit(0)
time.sleep(0.3)
print("full backlog, waiting child", "waits" if os.waitpid(pid, os.WNOHANG) == (0, 0) else "ended")
os.kill(pid, signal.SIGKILL)
print("full backlog, waiting child killed by signal", os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))
# Left waiting when the command ends: the sandbox still ends.
threading.Thread(target=lambda: socket.socket(U).connect("/tmp/full.sock"), daemon=True).start()
time.sleep(0.1)
"#;
    let started = Instant::now();
    let out = f.run_argv(json!({}), &["python3", "-c", script]);
    assert_eq!(out.code, Some(0), "{out:?}");
    assert_eq!(
        out.stdout,
        "worktree, relative pong:ping\n\
         worktree, absolute pong:ping\n\
         worktree, from a subdirectory pong:ping\n\
         tmp pong:ping\n\
         dev/shm pong:ping\n\
         seqpacket pong:ping\n\
         abstract pong:ping\n\
         symlink in the worktree to /tmp pong:ping\n\
         through /proc/self/fd pong:ping\n\
         non-blocking ok\n\
         missing errno 2\n\
         not a socket errno 111\n\
         wrong type errno 91\n\
         descriptor passing y\n\
         full backlog, non-blocking errno 11\n\
         full backlog, with a send timeout errno 11\n\
         full backlog, blocking: waits True\n\
         full backlog, blocking: after an accept ok\n\
         full backlog, waiting child waits\n\
         full backlog, waiting child killed by signal -9\n",
        "{out:?}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(60),
        "a connect left waiting kept the sandbox alive: {out:?}"
    );
}

#[test]
fn a_connect_made_by_pid_1_shows_pid_1_as_the_peer() {
    // The one documented difference a server inside can see (uid and gid are the caller's).
    require_tool("/usr/bin/python3");
    let f = Fixture::new();
    let out = f.run_argv(
        json!({}),
        &[
            "python3",
            "-c",
            r#"
import os, socket, struct
s = socket.socket(socket.AF_UNIX)
s.bind("/tmp/peer.sock")
s.listen(1)
c = socket.socket(socket.AF_UNIX)
c.connect("/tmp/peer.sock")
pid, uid, gid = struct.unpack("3i", s.accept()[0].getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12))
print(pid, uid == os.getuid(), gid == os.getgid())
"#,
        ],
    );
    assert_eq!(out.stdout, "1 True True\n", "{out:?}");
}

#[test]
fn with_network_inet_connects_behave_as_before() {
    require_tool("/usr/bin/python3");
    let f = Fixture::new();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let closed = {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let script = format!(
        r#"
import select, socket
def report(label, f):
    try:
        r = f()
        print(label, "ok" if r is None else r)
    except OSError as e:
        print(label, "errno", e.errno)
report("blocking", lambda: socket.create_connection(("127.0.0.1", {port})).close())
report("closed port", lambda: socket.create_connection(("127.0.0.1", {closed})).close())
def nonblocking():
    s = socket.socket()
    s.setblocking(False)
    e = s.connect_ex(("127.0.0.1", {port}))
    select.select([], [s], [], 10)
    return f"{{e in (0, 115)}} {{s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)}}"
report("non-blocking", nonblocking)
"#
    );
    let out = f.run_argv(json!({"network": true}), &["python3", "-c", &script]);
    assert_eq!(
        out.stdout, "blocking ok\nclosed port errno 111\nnon-blocking True 0\n",
        "{out:?}"
    );
    listener.set_nonblocking(true).unwrap();
    let accepted = std::iter::from_fn(|| listener.accept().ok()).count();
    assert_eq!(accepted, 2, "{out:?}");
}

// ---------------------------------------------------------------------------------------
// Limits.

/// Pids of the processes in `pid`'s PID namespace, seen from the host.
fn processes_in_namespace_of(pid: u32) -> Option<usize> {
    let ns = fs::read_link(format!("/proc/{pid}/ns/pid")).ok()?;
    let mut count = 0;
    for entry in fs::read_dir("/proc").ok()?.flatten() {
        let name = entry.file_name();
        if !name.to_string_lossy().bytes().all(|b| b.is_ascii_digit()) {
            continue;
        }
        if fs::read_link(entry.path().join("ns/pid")).ok().as_ref() == Some(&ns) {
            count += 1;
        }
    }
    Some(count)
}

#[test]
fn a_fork_bomb_is_contained_and_the_host_stays_responsive() {
    refuse_without_sandbox("a fork bomb");
    let f = Fixture::new();
    const LIMIT: usize = 64;
    let spec = f.spec(json!({"limits": {"maxProcesses": LIMIT}}));
    let child = f
        .command(
            &spec,
            // The bomb's first call returns at once, leaving orphans that multiply: keep
            // the sandbox alive with a `sleep` started before it (`wait` is a builtin).
            &[
                "bash",
                "-c",
                "sleep 10 & s=$!; bash -c ':(){ :|:& };:' 2>/dev/null; wait $s; echo bomb-over",
            ],
        )
        .spawn()
        .unwrap();
    let runner = child.id();
    let sampler = thread::spawn(move || {
        let start = Instant::now();
        let mut init = None;
        let mut max_seen = 0;
        let mut slowest_spawn = Duration::ZERO;
        let mut last_spawn = Instant::now() - Duration::from_secs(1);
        while start.elapsed() < Duration::from_secs(14) {
            if init.is_none() {
                init = fs::read_to_string(format!("/proc/{runner}/task/{runner}/children"))
                    .ok()
                    .and_then(|s| s.split_whitespace().next().map(str::to_owned))
                    .and_then(|s| s.parse::<u32>().ok());
            }
            if let Some(init) = init {
                match processes_in_namespace_of(init) {
                    Some(n) => max_seen = max_seen.max(n),
                    None if start.elapsed() > Duration::from_secs(2) => break,
                    None => {}
                }
            }
            if last_spawn.elapsed() >= Duration::from_millis(500) {
                let t = Instant::now();
                let ok = Command::new("true").status().map(|s| s.success());
                assert!(matches!(ok, Ok(true)), "the host could not spawn `true`");
                slowest_spawn = slowest_spawn.max(t.elapsed());
                last_spawn = Instant::now();
            }
            thread::sleep(Duration::from_millis(20));
        }
        (init.is_some(), max_seen, slowest_spawn)
    });
    let out = finish(child, TIMEOUT);
    let (saw_init, max_seen, slowest_spawn) = sampler.join().unwrap();
    assert!(saw_init, "never saw the sandbox's init: {out:?}");
    assert!(out.stdout.contains("bomb-over"), "{out:?}");
    assert!(
        max_seen >= LIMIT / 2,
        "the bomb never got going ({max_seen} processes): {out:?}"
    );
    assert!(
        max_seen <= LIMIT,
        "{max_seen} processes in the sandbox, limit {LIMIT}"
    );
    assert!(
        slowest_spawn < Duration::from_secs(2),
        "spawning on the host took {slowest_spawn:?} during the bomb"
    );
}

#[test]
fn a_memory_hog_fails_instead_of_taking_the_host() {
    refuse_without_sandbox("a memory hog");
    require_tool("/usr/bin/python3");
    let f = Fixture::new();
    let started = Instant::now();
    let out = f.run_with(
        json!({"limits": {"memoryBytes": 512u64 << 20}}),
        "python3 -c 'b = bytearray(4 << 30); print(\"ALLOCATED\")'; echo python=$?
         head -c 3G /dev/zero | tail > /dev/null; echo tail=$?",
    );
    assert!(out.stderr.contains("MemoryError"), "{out:?}");
    assert!(!out.stdout.contains("ALLOCATED"), "{out:?}");
    assert!(!out.stdout.contains("python=0"), "{out:?}");
    assert!(!out.stdout.contains("tail=0"), "{out:?}");
    assert!(started.elapsed() < Duration::from_secs(60), "{out:?}");
}

#[test]
fn the_memory_cgroup_bounds_the_whole_sandbox() {
    refuse_without_sandbox("a memory hog");
    require_tool("/usr/bin/python3");
    if nix::unistd::getuid().is_root() {
        assert!(
            Path::new("/sys/fs/cgroup/memory").exists()
                || Path::new("/sys/fs/cgroup/cgroup.controllers").exists(),
            "this test needs a memory cgroup on the host"
        );
    }
    let f = Fixture::new();
    // Four processes of 160 MiB each, every one under RLIMIT_AS, together over 384 MiB.
    let out = f.run_with(
        json!({"limits": {"memoryBytes": 384u64 << 20}}),
        "for i in 1 2 3 4; do
           python3 -c 'import time; b = bytearray(160 << 20); time.sleep(3)' &
         done
         failed=0; for j in 1 2 3 4; do wait -n || failed=$((failed+1)); done
         echo failed=$failed",
    );
    assert!(out.stdout.contains("failed="), "{out:?}");
    assert!(!out.stdout.contains("failed=0"), "all four fitted: {out:?}");
}

#[test]
fn private_tmp_is_size_capped() {
    let f = Fixture::new();
    let big = format!("/tmp/codebutler-big-{}", std::process::id());
    let out = f.run_with(
        json!({"limits": {"tmpBytes": 8u64 << 20}}),
        &format!("head -c 16M /dev/zero > {big}; echo rc=$?"),
    );
    let _ = fs::remove_file(&big);
    assert!(!out.stdout.contains("rc=0"), "{out:?}");
    assert!(out.stderr.contains("No space left"), "{out:?}");
}

#[test]
fn file_size_is_capped() {
    let f = Fixture::new();
    let out = f.run_with(
        json!({"limits": {"fileSizeBytes": 1u64 << 20}}),
        "head -c 2M /dev/zero > big.bin; echo rc=$?",
    );
    assert!(!out.stdout.contains("rc=0"), "{out:?}");
    let size = fs::metadata(f.worktree.join("big.bin")).unwrap().len();
    assert!(size <= 1 << 20, "wrote {size} bytes");
}

// ---------------------------------------------------------------------------------------
// Failures are reported by step; the opt-out is loud.

#[test]
fn a_failing_step_is_named() {
    let f = Fixture::new();
    let out = f.run_with(json!({"worktree": "/nonexistent/worktree"}), "echo RAN");
    assert_eq!(out.code, Some(125), "{out:?}");
    assert!(!out.stdout.contains("RAN"), "{out:?}");
    assert!(
        out.stderr
            .contains("sandbox step `resolve_worktree` failed: canonicalize /nonexistent/worktree"),
        "{out:?}"
    );

    let out = f.run_with(json!({"readOnly": [f.repo]}), "echo RAN");
    assert_eq!(out.code, Some(125), "{out:?}");
    assert!(!out.stdout.contains("RAN"), "{out:?}");
    assert!(
        out.stderr.contains("sandbox step `validate_spec` failed"),
        "{out:?}"
    );
}

#[test]
fn mode_none_warns_loudly() {
    let f = Fixture::new();
    let out = f.run_with(json!({"mode": "none"}), "echo RAN");
    assert_eq!(out.code, Some(0), "{out:?}");
    assert!(out.stdout.contains("RAN"), "{out:?}");
    assert!(out.stderr.contains("WARNING: SANDBOX DISABLED"), "{out:?}");
}
