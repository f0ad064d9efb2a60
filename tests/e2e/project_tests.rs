//! The Coder runs the project's own tests (issue 27): a worktree's preparation installs what
//! the tests need, from the registries, with the network it has for that step only; the
//! Coder is told the project's test command; its Bash call runs it in the sandbox, which
//! has no network, and the tests pass; the run's summary says so, read from that Bash
//! result. One test per way a Python project declares its test runner, then a Node project
//! whose tests use a test runner from npm, a Rust crate with a dev-dependency from
//! crates.io, and a Go module with a test-only dependency served through a file-based
//! module proxy (the public proxy is out of reach here; see
//! `codebutler_test_support::goproxy`).
//!
//! Everything is checked from outside: the Bash result the fake model received, the
//! thread's posts in the fake Slack, the task the fake model was sent, and the packages
//! the preparation left in the worktree on the host.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use codebutler_test_support::merge;
use codebutler_test_support::model::Reply;
use codebutler_test_support::{git, goproxy};
use serde_json::{Value, json};

use crate::harness::{Env, thread_with_plan_of, tool_results, user_messages};

/// How long a preparation that downloads from the registries, and the run after it, may
/// take on a busy machine.
const PREPARED_AND_RUN: Duration = Duration::from_secs(600);

/// A small project whose tests need something from a registry.
struct Project {
    /// In the plan's summary: the fake model's script for the Coder is found by it.
    token: &'static str,
    files: Vec<(String, String)>,
    /// Merged into the repository's config.
    config: Value,
    /// What the Coder's Bash call runs (and the task should name).
    test_command: &'static str,
    /// What the tests print when they pass.
    passed: &'static str,
}

/// What a project's run left, seen from outside.
struct Seen {
    env: Env,
    /// The thread's posts, each as last updated, with Slack's escaping undone.
    texts: Vec<String>,
    /// The Coder's task, as the fake model received it.
    task: String,
    /// The Bash results the fake model received.
    bash: String,
    worktree: PathBuf,
}

impl Seen {
    /// The preparation's line once it finished.
    fn prepared_line(&self) -> &str {
        self.texts
            .iter()
            .find(|t| t.starts_with("*Coder:* prepared the worktree: `"))
            .unwrap_or_else(|| panic!("no preparation line in {:?}", self.texts))
    }
}

/// Slack's escaping of `&`, `<` and `>` undone.
fn unescaped(text: &str) -> String {
    text.replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&amp;", "&")
}

/// Commits the project, has the PM propose a plan and a person approve it, and waits for
/// the run (the Coder's script: the test command in Bash, then `last_words`) to end well.
async fn run(project: &Project, last_words: &str) -> Seen {
    let mut config = json!({
        "coder": {"maxTurns": 5, "timeout": 15},
        "sandbox": {"memoryMB": 4096}
    });
    merge(&mut config, project.config.clone());
    let env = Env::with_runner(config).await;
    let files: Vec<(&str, &str)> = project
        .files
        .iter()
        .map(|(p, t)| (p.as_str(), t.as_str()))
        .collect();
    git::commit_files(env.repo_path(), &files, "The project");
    env.model.script(
        project.token,
        vec![
            Reply::tool_call(
                "Bash",
                json!({"command": project.test_command, "timeout": 600}).to_string(),
            ),
            Reply::text(last_words),
        ],
    );
    let _daemon = env.start().await;
    let plan = json!({
        "summary": format!("Check {}", project.token),
        "steps": ["Run the tests"],
        "files": []
    });
    let thread = thread_with_plan_of(&env, "run the tests", &plan, "Plan ready.").await;
    let approval = env.reply(&thread, "LGTM!");
    let ended = env
        .slack
        .wait_until(PREPARED_AND_RUN, || {
            env.slack
                .reactions()
                .iter()
                .any(|r| r.ts == approval.ts && (r.name == "white_check_mark" || r.name == "x"))
        })
        .await;
    let texts: Vec<String> = env
        .thread_texts(&thread)
        .iter()
        .map(|t| unescaped(t))
        .collect();
    assert!(ended, "the run never ended: {texts:?}");
    assert!(
        env.slack
            .reactions()
            .iter()
            .any(|r| r.ts == approval.ts && r.name == "white_check_mark"),
        "the run failed: {texts:?}"
    );
    let requests = env.model.requests_for(project.token);
    assert_eq!(requests.len(), 2, "{texts:?}");
    let task = user_messages(&requests[0].body)[0].clone();
    let bash = tool_results(&requests[1].body);
    let slug = format!("check-{}", project.token.to_lowercase());
    let worktree = env.repo_path().join(".codebutler/branches").join(slug);
    Seen {
        env,
        texts,
        task,
        bash,
        worktree,
    }
}

/// [`run`], and the tests passed.
async fn run_the_tests(project: Project) -> Seen {
    let seen = run(&project, "Done.").await;
    // The tests ran in the sandbox and passed, the Coder was told how this project's
    // tests run, and the thread's summary says so from the Bash result.
    assert!(seen.bash.contains(project.passed), "{}", seen.bash);
    assert!(seen.bash.ends_with("exit code: 0"), "{}", seen.bash);
    assert!(
        seen.task
            .contains(&format!("This project's tests: `{}`", project.test_command)),
        "{}",
        seen.task
    );
    assert!(
        seen.texts.iter().any(|t| t.starts_with("*Coder:* Done.")
            && t.contains(&format!(
                "Tests: `{}` passed (exit 0).",
                project.test_command
            ))),
        "{:?}",
        seen.texts
    );
    seen.env.assert_clean();
    seen
}

/// The files of a Python package `calc` with one pytest-style test, plus `extra`.
fn python_project(extra: &[(&str, &str)]) -> Vec<(String, String)> {
    let mut files = vec![
        (
            "calc/__init__.py".to_owned(),
            "def add(a, b):\n    return a + b\n".to_owned(),
        ),
        (
            "tests/test_calc.py".to_owned(),
            "from calc import add\n\n\ndef test_add():\n    assert add(1, 2) == 3\n".to_owned(),
        ),
    ];
    files.extend(
        extra
            .iter()
            .map(|(p, t)| ((*p).to_owned(), (*t).to_owned())),
    );
    files
}

/// A `pyproject.toml` building `calc` with setuptools, with `more` after it.
fn setuptools_pyproject(more: &str) -> String {
    format!(
        "[build-system]\nrequires = [\"setuptools>=64\"]\nbuild-backend = \"setuptools.build_meta\"\n\n[project]\nname = \"calc\"\nversion = \"0.1.0\"\n\n[tool.setuptools]\npackages = [\"calc\"]\n{more}"
    )
}

/// The version of `package` the preparation installed into the worktree's `.venv`, read
/// from its `dist-info` directory on the host.
fn installed_version(worktree: &Path, package: &str) -> Option<String> {
    let lib = worktree.join(".venv/lib");
    for python in std::fs::read_dir(&lib).ok()? {
        let site = python.ok()?.path().join("site-packages");
        for entry in std::fs::read_dir(site).ok()? {
            let name = entry.ok()?.file_name().to_string_lossy().into_owned();
            if let Some(version) = name
                .strip_prefix(&format!("{package}-"))
                .and_then(|rest| rest.strip_suffix(".dist-info"))
            {
                return Some(version.to_owned());
            }
        }
    }
    None
}

/// The Python project's test run, with the preparation's line expected to be `prepared`
/// (its duration left out).
async fn python_way(token: &'static str, extra: &[(&str, &str)], prepared: &str) -> Seen {
    let seen = run_the_tests(Project {
        token,
        files: python_project(extra),
        config: json!({}),
        test_command: "python -m pytest -q",
        passed: "1 passed",
    })
    .await;
    let line = seen.prepared_line();
    let (command, rest) = line
        .strip_prefix("*Coder:* prepared the worktree: `")
        .and_then(|l| l.split_once("` ("))
        .unwrap_or_else(|| panic!("{line}"));
    let notes = rest.split_once(')').map_or("", |(_, n)| n);
    assert_eq!(format!("{command}{notes}"), prepared, "{line}");
    seen
}

#[tokio::test]
async fn python_tests_declared_in_requirements_dev_txt_run_in_the_sandbox() {
    python_way(
        "PY-REQS",
        &[
            ("pyproject.toml", &setuptools_pyproject("")),
            ("requirements-dev.txt", "pytest>=8\n"),
        ],
        "python3 -m venv .venv && .venv/bin/pip install -e . -r requirements-dev.txt",
    )
    .await;
}

#[tokio::test]
async fn python_tests_declared_in_requirements_test_txt_run_in_the_sandbox() {
    // No package to install: the tests import the module from the checkout.
    python_way(
        "PY-REQDIR",
        &[
            ("requirements/base.txt", "iniconfig\n"),
            ("requirements/test.txt", "-r base.txt\npytest\n"),
        ],
        "python3 -m venv .venv && .venv/bin/pip install -r requirements/test.txt",
    )
    .await;
}

#[tokio::test]
async fn python_tests_declared_as_an_optional_dependency_run_in_the_sandbox() {
    python_way(
        "PY-EXTRA",
        &[(
            "pyproject.toml",
            &setuptools_pyproject(
                "\n[project.optional-dependencies]\ntest = [\"pytest>=8\"]\ndocs = [\"sphinx\"]\n",
            ),
        )],
        "python3 -m venv .venv && .venv/bin/pip install -e '.[test]'",
    )
    .await;
}

/// The issue's own case: a PEP 735 group and a `requirements-dev.txt`, where the
/// preparation used to run only `pip install -e .`.
#[tokio::test]
async fn python_tests_declared_in_a_dependency_group_run_in_the_sandbox() {
    python_way(
        "PY-GROUP",
        &[
            (
                "pyproject.toml",
                &setuptools_pyproject("\n[dependency-groups]\ntest = [\"pytest\"]\n"),
            ),
            ("requirements-dev.txt", "iniconfig\n"),
        ],
        "python3 -m venv .venv && .venv/bin/pip install -e . -r requirements-dev.txt pytest",
    )
    .await;
}

#[tokio::test]
async fn python_tests_declared_in_a_poetry_group_run_at_the_locks_versions() {
    let seen = python_way(
        "PY-POETRY",
        &[
            (
                "pyproject.toml",
                include_str!("fixtures/python/poetry/pyproject.toml"),
            ),
            (
                "poetry.lock",
                include_str!("fixtures/python/poetry/poetry.lock"),
            ),
        ],
        "python3 -m venv .venv && .venv/bin/pip install -c (6 versions poetry.lock pins) -e . pytest==8.4.2",
    )
    .await;
    // pytest 8.4.2 is what poetry.lock pins, not PyPI's newest.
    assert_eq!(
        installed_version(&seen.worktree, "pytest").as_deref(),
        Some("8.4.2")
    );
    assert_eq!(
        installed_version(&seen.worktree, "pluggy").as_deref(),
        Some("1.7.0")
    );
}

#[tokio::test]
async fn python_tests_locked_by_uv_run_at_the_locks_versions_without_uv() {
    let seen = python_way(
        "PY-UV",
        &[
            (
                "pyproject.toml",
                include_str!("fixtures/python/uv/pyproject.toml"),
            ),
            ("uv.lock", include_str!("fixtures/python/uv/uv.lock")),
        ],
        "python3 -m venv .venv && .venv/bin/pip install -c (5 versions uv.lock pins) -e . 'pytest>=8'; no `uv` in the sandbox, so pip installed the versions `uv.lock` pins",
    )
    .await;
    assert_eq!(
        installed_version(&seen.worktree, "pytest").as_deref(),
        Some("8.3.4")
    );
    assert_eq!(
        installed_version(&seen.worktree, "packaging").as_deref(),
        Some("24.2")
    );
}

#[tokio::test]
async fn python_tests_declared_in_tox_ini_run_in_the_sandbox() {
    python_way(
        "PY-TOX",
        &[
            ("pyproject.toml", &setuptools_pyproject("")),
            (
                "tox.ini",
                "[tox]\nenvlist = py311\n\n[testenv]\ndeps =\n    pytest>=8\ncommands = pytest {posargs}\n",
            ),
        ],
        "python3 -m venv .venv && .venv/bin/pip install -e . 'pytest>=8'",
    )
    .await;
}

#[tokio::test]
async fn python_tests_declared_in_setup_cfg_extras_run_in_the_sandbox() {
    python_way(
        "PY-SETUPCFG",
        &[
            (
                "setup.cfg",
                "[metadata]\nname = calc\nversion = 0.1.0\n\n[options]\npackages = calc\n\n[options.extras_require]\ntesting =\n    pytest>=8\n",
            ),
            ("setup.py", "from setuptools import setup\n\nsetup()\n"),
        ],
        "python3 -m venv .venv && .venv/bin/pip install -e '.[testing]'",
    )
    .await;
}

#[tokio::test]
async fn python_tests_that_plainly_use_pytest_get_it_though_nothing_declares_it() {
    python_way(
        "PY-UNDECLARED",
        &[("pyproject.toml", &setuptools_pyproject(""))],
        "python3 -m venv .venv && .venv/bin/pip install -e . pytest; pytest, not declared, installed",
    )
    .await;
}

/// The summary says how the tests ended as the Bash tool reported it, whatever the Coder
/// says about them.
#[tokio::test]
async fn failing_tests_are_said_to_fail_whatever_the_coder_says() {
    let mut files = python_project(&[("requirements-dev.txt", "pytest\n")]);
    files[0].1 = "def add(a, b):\n    return a - b\n".to_owned();
    let project = Project {
        token: "PY-FAILING",
        files,
        config: json!({}),
        test_command: "python -m pytest -q",
        passed: "1 passed",
    };
    let seen = run(&project, "All the tests pass.").await;
    assert!(seen.bash.contains("1 failed"), "{}", seen.bash);
    assert!(seen.bash.ends_with("exit code: 1"), "{}", seen.bash);
    assert!(
        seen.texts
            .iter()
            .any(|t| t.starts_with("*Coder:* All the tests pass.")
                && t.ends_with("Tests: `python -m pytest -q` failed (exit 1).")),
        "{:?}",
        seen.texts
    );
    assert!(
        !seen.texts.iter().any(|t| t.contains("passed (exit 0)")),
        "{:?}",
        seen.texts
    );
    seen.env.assert_clean();
}

#[tokio::test]
async fn node_tests_run_with_a_test_runner_from_npm() {
    let seen = run_the_tests(Project {
        token: "NODE-UVU",
        files: vec![
            (
                "package.json".into(),
                include_str!("fixtures/node/package.json").into(),
            ),
            (
                "package-lock.json".into(),
                include_str!("fixtures/node/package-lock.json").into(),
            ),
            (
                "src/calc.js".into(),
                "export const add = (a, b) => a + b;\n".into(),
            ),
            (
                "tests/calc.test.js".into(),
                "import { test } from 'uvu';\nimport * as assert from 'uvu/assert';\nimport { add } from '../src/calc.js';\n\ntest('adds', () => {\n  assert.is(add(1, 2), 3);\n});\n\ntest.run();\n".into(),
            ),
        ],
        // Prepared after the approval (the cold path): the task names the tests there too.
        config: json!({"build": {"prepareAheadIdleMinutes": 0}}),
        test_command: "npm test",
        passed: "Passed:    1",
    })
    .await;
    assert!(
        seen.prepared_line()
            .starts_with("*Coder:* prepared the worktree: `npm ci` ("),
        "{}",
        seen.prepared_line()
    );
    // uvu came from the registry into the worktree: the dev dependency the tests need.
    assert!(
        seen.worktree
            .join("node_modules/uvu/package.json")
            .is_file()
    );
}

#[tokio::test]
async fn rust_tests_build_offline_with_a_dev_dependency_from_crates_io() {
    // The toolchain an operator points the sandbox at: rustup's, read-only, on its PATH.
    let sysroot = Command::new("rustc")
        .args(["--print", "sysroot"])
        .output()
        .expect("rustc is on the test's PATH");
    let sysroot = String::from_utf8(sysroot.stdout).unwrap().trim().to_owned();
    let seen = run_the_tests(Project {
        token: "RUST-DEV",
        files: vec![
            (
                "Cargo.toml".into(),
                "[package]\nname = \"calc\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n[dev-dependencies]\nassert_matches = \"1.5\"\n".into(),
            ),
            (
                "src/lib.rs".into(),
                "/// Adds two numbers, refusing an overflow.\npub fn add(a: u32, b: u32) -> Option<u32> {\n    a.checked_add(b)\n}\n\n#[cfg(test)]\nmod tests {\n    use super::add;\n    use assert_matches::assert_matches;\n\n    #[test]\n    fn adds_and_refuses_overflow() {\n        assert_matches!(add(1, 2), Some(3));\n        assert_matches!(add(u32::MAX, 1), None);\n    }\n}\n".into(),
            ),
        ],
        config: json!({
            "sandbox": {"readOnly": [sysroot]},
            "build": {"path": [format!("{sysroot}/bin")]}
        }),
        test_command: "cargo test --offline",
        passed: "test tests::adds_and_refuses_overflow ... ok",
    })
    .await;
    assert!(
        seen.prepared_line()
            .starts_with("*Coder:* prepared the worktree: `cargo fetch` ("),
        "{}",
        seen.prepared_line()
    );
    assert!(
        seen.worktree
            .join(".codebutler-cache/cargo/registry/cache")
            .is_dir()
    );
}

#[tokio::test]
async fn go_tests_run_offline_with_a_test_only_dependency_from_the_operators_proxy() {
    let scratch = tempfile::tempdir().unwrap();
    let proxy = goproxy::serve_debian_module(scratch.path(), "github.com/google/go-cmp", "v0.5.9");
    let goproxy = format!("file://{}", proxy.display());
    let files: Vec<(String, String)> = vec![
        (
            "go.mod".into(),
            "module example.com/calc\n\ngo 1.19\n\nrequire github.com/google/go-cmp v0.5.9\n".into(),
        ),
        (
            "calc.go".into(),
            "package calc\n\n// Add adds two numbers.\nfunc Add(a, b int) int { return a + b }\n".into(),
        ),
        (
            "calc_test.go".into(),
            "package calc\n\nimport (\n\t\"testing\"\n\n\t\"github.com/google/go-cmp/cmp\"\n)\n\nfunc TestAdd(t *testing.T) {\n\tif diff := cmp.Diff(3, Add(1, 2)); diff != \"\" {\n\t\tt.Errorf(\"Add(1, 2) mismatch (-want +got):\\n%s\", diff)\n\t}\n}\n".into(),
        ),
    ];
    // go.sum as a developer commits it: what `go mod tidy` writes from the proxy.
    let module = scratch.path().join("module");
    std::fs::create_dir_all(&module).unwrap();
    for (path, text) in &files {
        std::fs::write(module.join(path), text).unwrap();
    }
    let tidy = Command::new("go")
        .args(["mod", "tidy"])
        .current_dir(&module)
        .env("GOPROXY", &goproxy)
        .env("GONOSUMDB", "github.com/google/go-cmp")
        .env("GOFLAGS", "-modcacherw")
        .env("GOPATH", scratch.path().join("gopath"))
        .env("GOCACHE", scratch.path().join("gocache"))
        .env("GOTOOLCHAIN", "local")
        .env("HOME", scratch.path())
        .output()
        .expect("go is installed (apt-get install golang-go)");
    assert!(tidy.status.success(), "{tidy:?}");
    let go_sum = std::fs::read_to_string(module.join("go.sum")).unwrap();
    let mut files = files;
    files.push(("go.sum".into(), go_sum));
    let seen = run_the_tests(Project {
        token: "GO-CMP",
        files,
        // What an operator with a module proxy of their own configures.
        config: json!({
            "sandbox": {"readOnly": [proxy.display().to_string()]},
            "build": {"env": {"GOPROXY": goproxy, "GONOSUMDB": "github.com/google/go-cmp"}}
        }),
        test_command: "go test ./...",
        passed: "ok  \texample.com/calc",
    })
    .await;
    assert!(
        seen.prepared_line()
            .starts_with("*Coder:* prepared the worktree: `go mod download` ("),
        "{}",
        seen.prepared_line()
    );
    assert!(
        seen.worktree
            .join(".codebutler-cache/go/pkg/mod/github.com/google/go-cmp@v0.5.9/cmp/compare.go")
            .is_file()
    );
}
