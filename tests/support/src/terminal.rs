//! A real terminal for tests of interactive programs: the program runs in a tmux session of
//! its own (a private tmux server on a socket in the test's directory, so no other tmux is
//! touched), keys are typed with `send-keys` and the screen is read with `capture-pane`.
//! Waiting is always for something to appear on the screen, with a deadline — never a
//! sleep that hopes the program got there.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// A program running in its own tmux session. The server is killed when dropped.
#[derive(Debug)]
pub struct Terminal {
    socket: PathBuf,
    /// Where the shell around the program writes its exit status (tmux's own
    /// `pane_dead_status` waits on tmux reaping the process, which it may do late).
    status: PathBuf,
}

const SESSION: &str = "cb";

impl Terminal {
    /// Runs `argv` with exactly the environment `env` (plus `TERM`, `LANG`) in `cwd`, in a
    /// 200×50 terminal whose tmux server keeps its socket and config in `dir`.
    pub fn start(dir: &Path, argv: &[String], env: &[(String, String)], cwd: &Path) -> Terminal {
        std::fs::create_dir_all(dir).expect("terminal: create dir");
        let conf = dir.join("tmux.conf");
        // The pane stays after the program ends, so its exit status and last screen can be
        // read.
        std::fs::write(
            &conf,
            "set -g remain-on-exit on\nset -g history-limit 20000\nset -g status off\n",
        )
        .expect("terminal: write tmux.conf");
        let socket = dir.join("tmux.sock");
        let exit_file = dir.join("exit-status");
        let mut words = vec![
            "env".to_owned(),
            "-i".to_owned(),
            "TERM=screen".to_owned(),
            "LANG=C.UTF-8".to_owned(),
        ];
        words.extend(env.iter().map(|(k, v)| quote(&format!("{k}={v}"))));
        words.extend(argv.iter().map(|a| quote(a)));
        let script = format!(
            "{}; echo $? > {}",
            words.join(" "),
            quote(&exit_file.to_string_lossy())
        );
        let status = Command::new("tmux")
            .arg("-u")
            .arg("-S")
            .arg(&socket)
            .arg("-f")
            .arg(&conf)
            .args([
                "new-session",
                "-d",
                "-s",
                SESSION,
                "-x",
                "200",
                "-y",
                "50",
                "-c",
            ])
            .arg(cwd)
            .arg(script)
            .status()
            .expect("terminal: run tmux (install it: apt-get install tmux)");
        assert!(status.success(), "terminal: tmux new-session failed");
        Terminal {
            socket,
            status: exit_file,
        }
    }

    fn tmux(&self) -> Command {
        let mut command = Command::new("tmux");
        command.arg("-S").arg(&self.socket);
        command
    }

    /// Everything the terminal shows, its scrollback included, wrapped lines joined.
    pub fn screen(&self) -> String {
        let output = self
            .tmux()
            .args(["capture-pane", "-p", "-J", "-S", "-20000", "-t", SESSION])
            .output()
            .expect("terminal: capture-pane");
        String::from_utf8_lossy(&output.stdout).into_owned()
    }

    /// Waits until the screen shows `text` (counting from the `after`th time it appears:
    /// 0 for its first appearance); returns the screen. Panics with the screen at the
    /// deadline.
    pub async fn wait_for_nth(&self, text: &str, after: usize, timeout: Duration) -> String {
        let deadline = Instant::now() + timeout;
        loop {
            let screen = self.screen();
            if screen.matches(text).count() > after {
                return screen;
            }
            if Instant::now() >= deadline {
                panic!(
                    "terminal: {text:?} (appearance {}) did not show within {timeout:?}; the screen:\n{screen}",
                    after + 1
                );
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Waits until the screen shows `text`; returns the screen.
    pub async fn wait_for(&self, text: &str, timeout: Duration) -> String {
        self.wait_for_nth(text, 0, timeout).await
    }

    /// Waits until the program turned its terminal's echo off — a hidden prompt (a password's)
    /// reads from then on. Such a prompt flushes what was typed before it (as `sudo`'s does),
    /// so a test types its answer only once this returns.
    pub async fn wait_echo_off(&self, timeout: Duration) {
        let tty = self.pane_field("#{pane_tty}");
        let deadline = Instant::now() + timeout;
        loop {
            let settings = Command::new("stty")
                .arg("-F")
                .arg(&tty)
                .arg("-a")
                .output()
                .expect("terminal: run stty");
            let settings = String::from_utf8_lossy(&settings.stdout);
            if settings.split_whitespace().any(|w| w == "-echo") {
                return;
            }
            if Instant::now() >= deadline {
                panic!(
                    "terminal: echo still on after {timeout:?}; the screen:\n{}",
                    self.screen()
                );
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    fn pane_field(&self, format: &str) -> String {
        let output = self
            .tmux()
            .args(["display-message", "-p", "-t", SESSION, format])
            .output()
            .expect("terminal: display-message");
        String::from_utf8_lossy(&output.stdout).trim().to_owned()
    }

    /// Presses keys by tmux's names (`Enter`, `Down`, `C-c`).
    pub fn keys(&self, keys: &[&str]) {
        let status = self
            .tmux()
            .args(["send-keys", "-t", SESSION])
            .args(keys)
            .status()
            .expect("terminal: send-keys");
        assert!(status.success(), "terminal: send-keys {keys:?}");
    }

    /// Types `text` as it is, then presses Enter.
    pub fn type_line(&self, text: &str) {
        if !text.is_empty() {
            let status = self
                .tmux()
                .args(["send-keys", "-t", SESSION, "-l", text])
                .status()
                .expect("terminal: send-keys -l");
            assert!(status.success(), "terminal: type {text:?}");
        }
        self.keys(&["Enter"]);
    }

    /// The program's exit status once it ended (`None` while it runs).
    pub fn exit_status(&self) -> Option<i32> {
        let text = std::fs::read_to_string(&self.status).ok()?;
        text.trim().parse().ok()
    }

    /// Waits for the program to end; its exit status. Panics with the screen at the deadline.
    pub async fn wait_exit(&self, timeout: Duration) -> i32 {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(status) = self.exit_status() {
                return status;
            }
            if Instant::now() >= deadline {
                panic!(
                    "terminal: the program did not end within {timeout:?}; {}; the screen:\n{}",
                    self.process_state(),
                    self.screen()
                );
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

impl Terminal {
    /// The pane's process as the kernel shows it (its state and each thread's wait), for a
    /// test that finds it still running.
    fn process_state(&self) -> String {
        let output = self
            .tmux()
            .args([
                "display-message",
                "-p",
                "-t",
                SESSION,
                "#{pane_pid} #{pane_dead}",
            ])
            .output();
        let Ok(output) = output else {
            return "no pane".to_owned();
        };
        let text = String::from_utf8_lossy(&output.stdout).trim().to_owned();
        let pid = text
            .split_whitespace()
            .next()
            .unwrap_or_default()
            .to_owned();
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
        let state = status
            .lines()
            .find(|l| l.starts_with("State:"))
            .unwrap_or("State: gone")
            .to_owned();
        let mut threads = Vec::new();
        if let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) {
            for task in tasks.flatten() {
                let read = |f: &str| {
                    std::fs::read_to_string(task.path().join(f))
                        .unwrap_or_default()
                        .trim()
                        .to_owned()
                };
                let syscall = read("syscall");
                threads.push(format!(
                    "{} in {} (syscall {})",
                    read("comm"),
                    read("wchan"),
                    syscall.split_whitespace().next().unwrap_or_default()
                ));
            }
        }
        format!("pane {text}: {state}; threads: {}", threads.join(", "))
    }
}

impl Drop for Terminal {
    fn drop(&mut self) {
        let _ = self.tmux().arg("kill-server").status();
    }
}

/// `word` in single quotes for `sh`.
fn quote(word: &str) -> String {
    format!("'{}'", word.replace('\'', r"'\''"))
}
