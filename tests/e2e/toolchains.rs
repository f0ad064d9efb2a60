//! `codebutler --status` lists the toolchains the sandbox is shown (issue 23), found as
//! the service finds them: in the homes its `PATH` leads to, laid out here as rustup's and
//! pyenv's installers lay out a home (the proxies in `.cargo/bin`, `.rustup/settings.toml`,
//! `.pyenv/versions/<v>/bin/python3` and the `version` file selecting one), and not looked
//! for with `sandbox.findToolchains` false (`init` lists them too: `wizard.rs`). That the toolchains found really build and
//! test a project in the sandbox is `project_tests.rs`'s Rust and pyenv tests.

use std::path::{Path, PathBuf};
use std::process::Stdio;

use serde_json::json;

use crate::harness::{Env, codebutler_command};

fn touch(path: &Path) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, "").unwrap();
}

/// A home with rustup and pyenv in it, the way their installers put them.
pub(crate) fn installed_home() -> tempfile::TempDir {
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    touch(&h.join(".cargo/bin/rustup"));
    std::os::unix::fs::symlink("rustup", h.join(".cargo/bin/cargo")).unwrap();
    touch(&h.join(".rustup/settings.toml"));
    std::fs::create_dir_all(h.join(".rustup/toolchains/stable-x86_64-unknown-linux-gnu")).unwrap();
    touch(&h.join(".pyenv/versions/3.12.1/bin/python3"));
    std::fs::write(h.join(".pyenv/version"), "3.12.1\n").unwrap();
    home
}

/// `codebutler --status` for `env`'s repository with `path_first` in front of the PATH.
fn status(env: &Env, path_first: &[PathBuf]) -> String {
    let mut path: Vec<PathBuf> = path_first.to_vec();
    path.extend(std::env::split_paths(
        &std::env::var_os("PATH").unwrap_or_default(),
    ));
    let output = codebutler_command(env.home.path())
        .env("PATH", std::env::join_paths(path).unwrap())
        .arg("--status")
        .arg("--repo")
        .arg(env.repo_path())
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(
        output.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    stdout
}

#[tokio::test]
async fn status_lists_the_toolchains_found_in_the_home_the_path_leads_to() {
    let env = Env::new().await;
    let home = installed_home();
    let h = std::fs::canonicalize(home.path()).unwrap();
    let shown = status(
        &env,
        &[
            home.path().join(".cargo/bin"),
            home.path().join(".pyenv/shims"),
        ],
    );
    let rustup = format!(
        "  rustup ({}, {})\n",
        h.join(".rustup").display(),
        h.join(".cargo/bin").display()
    );
    let pyenv = format!(
        "  pyenv 3.12.1 ({})\n",
        h.join(".pyenv/versions/3.12.1").display()
    );
    let block = shown
        .split_once("toolchains: ")
        .map(|(_, rest)| rest)
        .unwrap_or_else(|| panic!("no toolchains in:\n{shown}"));
    assert!(block.contains(&rustup), "{shown}");
    assert!(block.contains(&pyenv), "{shown}");
}

#[tokio::test]
async fn status_says_toolchains_are_not_looked_for_when_the_setting_is_off() {
    let env = Env::with_config(json!({"sandbox": {"findToolchains": false}})).await;
    let home = installed_home();
    let shown = status(&env, &[home.path().join(".cargo/bin")]);
    assert!(
        shown.contains("toolchains: not looked for (sandbox.findToolchains false)\n"),
        "{shown}"
    );
    assert!(
        !shown.contains(&home.path().display().to_string()),
        "{shown}"
    );
}
