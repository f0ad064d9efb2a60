//! The service under a service manager, checked from outside: the datagrams the real daemon
//! sends to a notify socket the test binds (`NOTIFY_SOCKET`, a path or an abstract address),
//! the unit file `--install` writes (and `systemd-analyze verify` on it), what the
//! service manager was asked to do, and the files left after `--uninstall`. This host runs
//! no systemd: `--install` meets the real `systemctl` saying so in a mount namespace
//! where systemd's runtime directories are empty (as on any host without it), and meets a
//! stand-in `systemctl` (`codebutler_test_support::systemd`) where it needs one that runs.

use std::collections::BTreeMap;
use std::os::unix::net::UnixDatagram;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use codebutler_test_support::slack::{APP_TOKEN, BOT_TOKEN};
use codebutler_test_support::systemd::{install_fake_systemd, journalctl_log, systemctl_log};
use serde_json::json;

use crate::harness::{Daemon, Env, codebutler_command};

/// One datagram the daemon sent, with how many hellos Slack had sent by then.
#[derive(Debug, Clone)]
struct Datagram {
    text: String,
    hellos: usize,
    /// Whether the first repository's admin socket (made by its start) was there by then.
    admin_socket: bool,
}

/// Reads datagrams from `socket` until `done` says so or `timeout` passes.
async fn read_datagrams(
    socket: UnixDatagram,
    env: &Env,
    timeout: Duration,
    done: impl Fn(&[Datagram]) -> bool + Send + 'static,
) -> Vec<Datagram> {
    let slack = env.slack.clone();
    let admin = env.repo_path().join(".codebutler/run/admin.sock");
    tokio::task::spawn_blocking(move || {
        socket
            .set_read_timeout(Some(Duration::from_millis(200)))
            .unwrap();
        let deadline = Instant::now() + timeout;
        let mut seen = Vec::new();
        let mut buf = vec![0u8; 4096];
        while Instant::now() < deadline && !done(&seen) {
            match socket.recv(&mut buf) {
                Ok(n) => seen.push(Datagram {
                    text: String::from_utf8_lossy(&buf[..n]).into_owned(),
                    hellos: slack.hellos_sent(),
                    admin_socket: admin.exists(),
                }),
                Err(e)
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                    ) => {}
                Err(e) => panic!("read the notify socket: {e}"),
            }
        }
        seen
    })
    .await
    .unwrap()
}

fn ready_at(seen: &[Datagram]) -> Option<usize> {
    seen.iter()
        .position(|d| d.text.lines().any(|l| l == "READY=1"))
}

fn watchdogs_after_ready(seen: &[Datagram]) -> usize {
    ready_at(seen).map_or(0, |at| {
        seen[at..].iter().filter(|d| d.text == "WATCHDOG=1").count()
    })
}

#[tokio::test]
async fn the_daemon_tells_systemd_it_is_ready_after_slacks_hello_and_pings_the_watchdog() {
    let env = Env::new().await;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("notify.sock");
    let socket = UnixDatagram::bind(&path).unwrap();
    let mut command = env.command();
    command
        .env("NOTIFY_SOCKET", &path)
        .env("WATCHDOG_USEC", "400000");
    let mut daemon = Daemon::spawn_logged(command, env.new_log());
    let seen = read_datagrams(socket, &env, Duration::from_secs(60), |seen| {
        watchdogs_after_ready(seen) >= 2
    })
    .await;
    let at =
        ready_at(&seen).unwrap_or_else(|| panic!("no READY=1 in {seen:?}; log:\n{}", daemon.log()));
    let ready = &seen[at];
    // Ready only once Slack said hello and the repository had started.
    assert!(ready.hellos >= 1, "READY=1 before Slack's hello: {seen:?}");
    assert!(
        ready.admin_socket,
        "READY=1 before the repository started: {seen:?}"
    );
    assert!(
        ready.text.contains("STATUS=serving repository"),
        "{ready:?}"
    );
    // What it did while starting was said before.
    let before: Vec<&str> = seen[..at].iter().map(|d| d.text.as_str()).collect();
    for status in [
        "STATUS=checking the set-up",
        "STATUS=starting repository",
        "STATUS=connecting to Slack",
    ] {
        assert!(
            before.iter().any(|t| t.starts_with(status)),
            "{status:?} before READY=1 in {before:?}"
        );
    }
    assert!(
        watchdogs_after_ready(&seen) >= 2,
        "watchdog pings: {seen:?}"
    );

    daemon.signal("TERM");
    let status = daemon.wait_exit(Duration::from_secs(60)).await;
    assert_eq!(status.code(), Some(0), "log:\n{}", daemon.log());
    for secret in [BOT_TOKEN, APP_TOKEN, "sk-or-test-key"] {
        assert!(
            !seen.iter().any(|d| d.text.contains(secret)),
            "{secret} sent to systemd"
        );
    }
}

#[tokio::test]
async fn the_daemon_says_stopping_to_systemd_when_it_stops() {
    let env = Env::new().await;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("notify.sock");
    let socket = UnixDatagram::bind(&path).unwrap();
    let mut command = env.command();
    command.env("NOTIFY_SOCKET", &path);
    let mut daemon = Daemon::spawn_logged(command, env.new_log());
    let seen = read_datagrams(
        socket.try_clone().unwrap(),
        &env,
        Duration::from_secs(60),
        |seen| ready_at(seen).is_some(),
    )
    .await;
    assert!(ready_at(&seen).is_some(), "no READY=1: {seen:?}");
    // No watchdog without WatchdogSec.
    assert!(
        !seen.iter().any(|d| d.text.contains("WATCHDOG")),
        "{seen:?}"
    );
    daemon.signal("TERM");
    let after = read_datagrams(socket, &env, Duration::from_secs(60), |seen| {
        seen.iter().any(|d| d.text.contains("STATUS=stopped"))
    })
    .await;
    let texts: Vec<&str> = after.iter().map(|d| d.text.as_str()).collect();
    let stopping = texts
        .iter()
        .position(|t| t.starts_with("STOPPING=1\nSTATUS=stopping"))
        .unwrap_or_else(|| panic!("no STOPPING=1 in {texts:?}"));
    let stopped = texts.iter().position(|t| *t == "STATUS=stopped").unwrap();
    assert!(stopping < stopped, "{texts:?}");
    assert_eq!(
        daemon.wait_exit(Duration::from_secs(60)).await.code(),
        Some(0)
    );
}

#[tokio::test]
async fn a_start_that_fails_tells_systemd_why_on_an_abstract_socket_and_is_never_ready() {
    use std::os::linux::net::SocketAddrExt;
    let env = Env::new().await;
    let revoked = "xoxb-revoked-5517-secret";
    env.write_global(json!({
        "slack": {"botToken": revoked, "appToken": APP_TOKEN},
        "openrouter": {"apiKey": "sk-or-test-key"}
    }));
    let name = format!("codebutler-test-{}-{}", std::process::id(), nanos());
    let address = std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes()).unwrap();
    let socket = UnixDatagram::bind_addr(&address).unwrap();
    let mut command = env.command();
    command.env("NOTIFY_SOCKET", format!("@{name}"));
    let mut daemon = Daemon::spawn_logged(command, env.new_log());
    let seen = read_datagrams(socket, &env, Duration::from_secs(60), |seen| {
        seen.iter().any(|d| d.text.starts_with("STATUS=failed"))
    })
    .await;
    let status = daemon.wait_exit(Duration::from_secs(60)).await;
    assert_eq!(status.code(), Some(2), "log:\n{}", daemon.log());
    assert!(
        ready_at(&seen).is_none(),
        "READY=1 of a failed start: {seen:?}"
    );
    let failed = seen
        .iter()
        .find(|d| d.text.starts_with("STATUS=failed"))
        .unwrap_or_else(|| panic!("no failure status: {seen:?}"));
    assert!(
        failed.text.contains("refused the bot token (invalid_auth)"),
        "{failed:?}"
    );
    assert_eq!(failed.text.lines().count(), 1, "{failed:?}");
    assert!(!seen.iter().any(|d| d.text.contains(revoked)), "{seen:?}");
}

fn nanos() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos()
}

/// `codebutler` with `args`, for the repository of `env`, with `vars` in its environment;
/// its exit code, standard output and standard error.
fn run(
    env: &Env,
    wrapper: &[&str],
    args: &[&str],
    vars: &[(&str, &Path)],
) -> (i32, String, String) {
    let base = codebutler_command(env.home.path());
    let mut command = if wrapper.is_empty() {
        base
    } else {
        let mut wrapped = Command::new(wrapper[0]);
        wrapped.args(&wrapper[1..]).arg(base.get_program());
        wrapped.env_clear();
        for (k, v) in base.get_envs() {
            if let Some(v) = v {
                wrapped.env(k, v);
            }
        }
        wrapped.stdin(Stdio::null());
        wrapped
    };
    command.args(args).arg("--repo").arg(env.repo_path());
    for (k, v) in vars {
        command.env(k, v);
    }
    let output = command.output().unwrap();
    (
        output.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

/// Every file and link under `dir`, with its content (a link's target).
fn files(dir: &Path) -> BTreeMap<PathBuf, String> {
    let mut found = BTreeMap::new();
    let mut stack = vec![dir.to_owned()];
    while let Some(at) = stack.pop() {
        for entry in std::fs::read_dir(&at).unwrap() {
            let path = entry.unwrap().path();
            let meta = std::fs::symlink_metadata(&path).unwrap();
            if meta.file_type().is_symlink() {
                let target = std::fs::read_link(&path).unwrap();
                found.insert(path, format!("-> {}", target.display()));
            } else if meta.is_dir() {
                stack.push(path);
            } else {
                found.insert(
                    path.clone(),
                    std::fs::read_to_string(&path).unwrap_or_default(),
                );
            }
        }
    }
    found
}

#[tokio::test]
async fn install_without_systemd_writes_nothing_and_prints_the_command_line_to_run() {
    let env = Env::new().await;
    let config = tempfile::tempdir().unwrap();
    std::fs::write(config.path().join("other.conf"), "mine").unwrap();
    let before = files(config.path());
    // systemd's runtime directories empty, as on a host (a container) without it; the real
    // systemctl answers.
    let hide = "for d in /run/systemd /run/dbus; do [ -d \"$d\" ] && mount -t tmpfs tmpfs \"$d\"; done; exec \"$@\"";
    let (code, stdout, stderr) = run(
        &env,
        &[
            "unshare",
            "--mount",
            "--propagation",
            "private",
            "sh",
            "-c",
            hide,
            "sh",
        ],
        &["--install"],
        &[("XDG_CONFIG_HOME", config.path())],
    );
    assert_eq!(code, 5, "stdout:\n{stdout}\nstderr:\n{stderr}");
    assert!(
        stderr.contains("systemd is not running on this host") && stderr.contains("offline"),
        "{stderr}"
    );
    let binary = Path::new(env!("CARGO_BIN_EXE_codebutler"))
        .canonicalize()
        .unwrap();
    let repo = env.repo_path().canonicalize().unwrap();
    assert_eq!(
        stdout.trim(),
        format!(
            "CODEBUTLER_HOME={} {} --repo {}",
            env.home.path().display(),
            binary.display(),
            repo.display()
        )
    );
    assert_eq!(files(config.path()), before, "something was written");
}

#[tokio::test]
async fn install_status_logs_and_uninstall_with_a_service_manager_standing_in() {
    let env = Env::new().await;
    let tools = tempfile::tempdir().unwrap();
    install_fake_systemd(tools.path());
    let config = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(config.path().join("systemd/user")).unwrap();
    std::fs::write(config.path().join("systemd/user/other.service"), "[Unit]\n").unwrap();
    let before = files(config.path());
    let path = format!(
        "{}:{}",
        tools.path().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let path = PathBuf::from(path);
    let vars = [("XDG_CONFIG_HOME", config.path()), ("PATH", path.as_path())];

    let (code, stdout, stderr) = run(&env, &[], &["--install"], &vars);
    assert_eq!(code, 0, "stdout:\n{stdout}\nstderr:\n{stderr}");
    let unit_path = config.path().join("systemd/user/codebutler.service");
    let unit = std::fs::read_to_string(&unit_path).unwrap();
    let binary = Path::new(env!("CARGO_BIN_EXE_codebutler"))
        .canonicalize()
        .unwrap();
    let repo = env.repo_path().canonicalize().unwrap();
    for line in [
        "Type=notify".to_owned(),
        "WatchdogSec=60".to_owned(),
        format!(
            "ExecStart=\"{}\" \"--repo\" \"{}\"",
            binary.display(),
            repo.display()
        ),
        format!(
            "Environment=\"CODEBUTLER_HOME={}\"",
            env.home.path().display()
        ),
        "WantedBy=default.target".to_owned(),
    ] {
        assert!(unit.lines().any(|l| l == line), "{line:?} in:\n{unit}");
    }
    assert_eq!(
        systemctl_log(tools.path()),
        [
            "--user is-system-running",
            "--user daemon-reload",
            "--user enable --now codebutler.service"
        ]
    );
    assert!(
        config
            .path()
            .join("systemd/user/default.target.wants/codebutler.service")
            .is_symlink()
    );
    verify(&unit_path, true);

    let (code, stdout, _) = run(&env, &[], &["--status"], &vars);
    assert_eq!(code, 0);
    assert!(
        stdout.contains(&format!(
            "service: installed, user ({})",
            unit_path.display()
        )),
        "{stdout}"
    );
    assert!(
        stdout.contains("  enabled  enabled\n  running  active\n"),
        "{stdout}"
    );

    let (code, _, stderr) = run(&env, &[], &["--logs"], &vars);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(
        journalctl_log(tools.path()),
        ["--user -u codebutler.service -f"]
    );

    let (code, stdout, stderr) = run(&env, &[], &["--uninstall"], &vars);
    assert_eq!(code, 0, "stdout:\n{stdout}\nstderr:\n{stderr}");
    let log = systemctl_log(tools.path());
    assert_eq!(
        log[log.len() - 3..],
        [
            "--user is-system-running",
            "--user disable --now codebutler.service",
            "--user daemon-reload"
        ]
    );
    assert_eq!(
        files(config.path()),
        before,
        "--uninstall left or took something"
    );
    let (_, stdout, _) = run(&env, &[], &["--status"], &vars);
    assert!(stdout.contains("service: not installed"), "{stdout}");
}

#[tokio::test]
async fn the_system_unit_goes_where_it_is_pointed_and_a_foreign_unit_is_left_alone() {
    let env = Env::new().await;
    let tools = tempfile::tempdir().unwrap();
    install_fake_systemd(tools.path());
    let system = tempfile::tempdir().unwrap();
    let path = PathBuf::from(format!(
        "{}:{}",
        tools.path().display(),
        std::env::var("PATH").unwrap_or_default()
    ));
    let vars = [
        ("FAKE_SYSTEMD_SYSTEM_DIR", system.path()),
        ("PATH", path.as_path()),
    ];
    let unit_dir = system.path().to_str().unwrap();
    let (code, stdout, stderr) = run(
        &env,
        &[],
        &["--install", "--system", "--unit-dir", unit_dir],
        &vars,
    );
    assert_eq!(code, 0, "stdout:\n{stdout}\nstderr:\n{stderr}");
    let unit_path = system.path().join("codebutler.service");
    let unit = std::fs::read_to_string(&unit_path).unwrap();
    assert!(
        unit.lines().any(|l| l == "WantedBy=multi-user.target"),
        "{unit}"
    );
    assert_eq!(
        systemctl_log(tools.path()),
        [
            "is-system-running",
            "daemon-reload",
            "enable --now codebutler.service"
        ]
    );
    verify(&unit_path, false);
    let (code, _, stderr) = run(
        &env,
        &[],
        &["--uninstall", "--system", "--unit-dir", unit_dir],
        &vars,
    );
    assert_eq!(code, 0, "{stderr}");
    assert!(
        files(system.path()).is_empty(),
        "{:?}",
        files(system.path())
    );

    // A unit someone else wrote there is neither replaced nor removed.
    std::fs::write(&unit_path, "[Unit]\nDescription=hand-made\n").unwrap();
    for args in [
        ["--install", "--system", "--unit-dir", unit_dir],
        ["--uninstall", "--system", "--unit-dir", unit_dir],
    ] {
        let (code, _, stderr) = run(&env, &[], &args, &vars);
        assert_eq!(code, 2, "{args:?}: {stderr}");
        assert!(
            stderr.contains("was not written by `codebutler --install`"),
            "{stderr}"
        );
        assert_eq!(
            std::fs::read_to_string(&unit_path).unwrap(),
            "[Unit]\nDescription=hand-made\n"
        );
    }
}

/// `systemd-analyze verify` finds nothing to say about the unit at `path` (it exits 0 even
/// for settings it ignores, so its output must be empty too).
fn verify(path: &Path, user: bool) {
    let runtime = tempfile::tempdir().unwrap();
    let mut command = Command::new("systemd-analyze");
    if user {
        command.arg("--user");
    }
    let output = command
        .arg("verify")
        .arg(path)
        .env("XDG_RUNTIME_DIR", runtime.path())
        .output()
        .expect("systemd-analyze (Debian's systemd package; tests/run installs it)");
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(output.status.success(), "systemd-analyze verify: {said}");
    assert!(said.trim().is_empty(), "systemd-analyze verify: {said}");
}

/// Where no systemd unit is installed, `--logs` follows the service's own log file: a line
/// the daemon writes arrives, and after the file rotated past `logging.maxFileMB` the next
/// line, written to the new file, arrives too.
#[tokio::test]
async fn logs_follow_the_log_file_across_its_rotation_where_no_unit_is_installed() {
    use crate::log_file::{ask, log_path, rotated};
    use std::io::{BufRead, BufReader};
    use std::sync::{Arc, Mutex};

    let env = Env::with_config(json!({"logging": {"maxFileMB": 0.001, "keepFiles": 2}})).await;
    let log = log_path(&env);
    let _daemon = env.start().await;
    // No unit in the user's config directory, nor in the one --unit-dir names.
    let config = tempfile::tempdir().unwrap();
    let units = tempfile::tempdir().unwrap();
    let mut command = codebutler_command(env.home.path());
    command
        .args(["--logs", "--unit-dir"])
        .arg(units.path())
        .arg("--repo")
        .arg(env.repo_path())
        .env("XDG_CONFIG_HOME", config.path())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    let mut follower = command.spawn().unwrap();
    let followed = Arc::new(Mutex::new(String::new()));
    let reader = {
        let stdout = follower.stdout.take().unwrap();
        let followed = followed.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                let mut all = followed.lock().unwrap();
                all.push_str(&line);
                all.push('\n');
            }
        })
    };
    let seen = |marker: String| {
        let followed = followed.clone();
        move || followed.lock().unwrap().contains(&marker)
    };

    // A line the daemon writes now arrives.
    ask(&env, 0).await;
    let ok = env
        .slack
        .wait_until(crate::harness::WAIT, seen("LOGFILE-0\"".to_owned()))
        .await;
    assert!(ok, "followed:\n{}", followed.lock().unwrap());

    // Until the file rotates; then a line written to the new file arrives too.
    let mut n = 1;
    while !rotated(&log, 1).exists() && n < 40 {
        ask(&env, n).await;
        n += 1;
    }
    assert!(rotated(&log, 1).exists(), "no rotation after {n} questions");
    // Written after the rotation: to the file that replaced the one `--logs` began with.
    ask(&env, n).await;
    let ok = env
        .slack
        .wait_until(crate::harness::WAIT, seen(format!("LOGFILE-{n}\"")))
        .await;
    assert!(ok, "followed:\n{}", followed.lock().unwrap());
    follower.kill().unwrap();
    follower.wait().unwrap();
    reader.join().unwrap();
}
