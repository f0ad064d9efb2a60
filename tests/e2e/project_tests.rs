//! The Coder runs the project's own tests (issue 27): a worktree's preparation installs what
//! the tests need, from the registries, with the network it has for that step only; the
//! Coder is told the project's test command; its Bash call runs it in the sandbox, which
//! has no network, and the tests pass; the run's summary says so, read from that Bash
//! result. One test per way a Python project declares its test runner (a `uv.lock` with
//! and without `uv`), then a Node project whose tests use a test runner from npm, locked by
//! each package manager (npm, classic yarn, yarn 2+ with its committed release, pnpm) and
//! one whose tests run with vitest (WebAssembly under the sandbox's memory limit), a
//! Rust crate with a dev-dependency from crates.io and a Python package, each built by the
//! toolchain (rustup, pyenv) found in the home with no `sandbox.readOnly` (issue 23), and a
//! Go module with a test-only dependency served through a file-based module proxy (the
//! public proxy is out of reach here; see `codebutler_test_support::goproxy`); and tests
//! that need the network, which fail in the sandbox.
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

    /// Fails unless the thread said the worktree was prepared by `command`.
    fn assert_prepared_by(&self, command: &str) {
        let line = self.prepared_line();
        assert!(
            line.starts_with(&format!("*Coder:* prepared the worktree: `{command}` (")),
            "{line}"
        );
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
        "the run failed: {texts:?}, its snippets: {:?}",
        env.slack
            .uploads()
            .iter()
            .map(|u| &u.content)
            .collect::<Vec<_>>()
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

/// The tool that installed `package` `version` into the worktree's `.venv` (its
/// `dist-info`'s `INSTALLER`: `pip` or `uv`), read on the host.
fn installer_of(worktree: &Path, package: &str, version: &str) -> Option<String> {
    for python in std::fs::read_dir(worktree.join(".venv/lib")).ok()? {
        let file = python.ok()?.path().join(format!(
            "site-packages/{package}-{version}.dist-info/INSTALLER"
        ));
        if let Ok(text) = std::fs::read_to_string(file) {
            return Some(text.trim().to_owned());
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

/// The Python pyenv's installer put in the home this test runs with, as the `version` file
/// selects it (its real directory).
fn pyenv_python() -> PathBuf {
    let root = std::env::var_os("PYENV_ROOT").map_or_else(
        || PathBuf::from(std::env::var_os("HOME").expect("HOME is set")).join(".pyenv"),
        PathBuf::from,
    );
    let version = std::fs::read_to_string(root.join("version"))
        .expect("pyenv is installed in the home with a version selected");
    let dir = root.join("versions").join(version.trim());
    assert!(dir.join("bin/python3").is_file(), "{}", dir.display());
    std::fs::canonicalize(dir).unwrap()
}

#[tokio::test]
async fn python_tests_run_with_the_python_pyenv_installed_in_the_home() {
    // No `sandbox.readOnly`, no `build.path`: pyenv's Python, found in the home the
    // service's PATH leads to, makes the project's `.venv` and runs its tests.
    let pyenv = pyenv_python();
    let seen = python_way(
        "PY-PYENV",
        &[
            ("pyproject.toml", &setuptools_pyproject("")),
            ("requirements-dev.txt", "pytest\n"),
        ],
        "python3 -m venv .venv && .venv/bin/pip install -e . -r requirements-dev.txt",
    )
    .await;
    // The venv's interpreter, as the host sees it: pyenv's, not the system's.
    let cfg = std::fs::read_to_string(seen.worktree.join(".venv/pyvenv.cfg")).unwrap();
    let home = format!("home = {}", pyenv.join("bin").display());
    assert!(cfg.lines().any(|l| l == home), "{home} in:\n{cfg}");
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

/// Where `tests/run` puts `uv`: a directory of its own, off the sandbox's `PATH`, so only
/// a test that names it in `build.path` has `uv` (the test above runs without it).
const UV_DIR: &str = "/usr/local/lib/codebutler-tests/uv";

/// `uv` where the sandbox finds it: `uv sync --frozen` installs the lock's test group into
/// `.venv`, its cache in the worktree's, and pytest runs offline.
#[tokio::test]
async fn python_tests_locked_by_uv_run_after_uv_sync_with_uv_in_build_path() {
    assert!(
        Path::new(UV_DIR).join("uv").is_file(),
        "uv is not in {UV_DIR}: tests/run installs it there"
    );
    let seen = run_the_tests(Project {
        token: "PY-UVSYNC",
        files: python_project(&[
            (
                "pyproject.toml",
                include_str!("fixtures/python/uv-test-group/pyproject.toml"),
            ),
            (
                "uv.lock",
                include_str!("fixtures/python/uv-test-group/uv.lock"),
            ),
        ]),
        config: json!({"build": {"path": [UV_DIR]}}),
        test_command: "python -m pytest -q",
        passed: "1 passed",
    })
    .await;
    seen.assert_prepared_by("python3 -m venv .venv && uv sync --frozen --group test");
    // The lock's versions, installed by uv (pip writes `pip` in INSTALLER), and what uv
    // downloaded in the worktree's cache.
    assert_eq!(
        installed_version(&seen.worktree, "pytest").as_deref(),
        Some("8.3.4")
    );
    assert_eq!(
        installer_of(&seen.worktree, "pytest", "8.3.4").as_deref(),
        Some("uv")
    );
    assert!(holds_a_file(&seen.worktree.join(".codebutler-cache/uv")));
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

/// Tests that need the network fail in the sandbox, and the summary says so: the Coder's
/// run has none, whatever the preparation had (the registry it downloaded from is out of
/// reach), so no test passes only because the sandbox had network.
#[tokio::test]
async fn tests_that_need_the_network_fail_in_the_sandbox() {
    let project = Project {
        token: "NET-TESTS",
        files: vec![
            (
                "Makefile".into(),
                "test:\n\tpython3 tests/registry_test.py\n".into(),
            ),
            (
                "tests/registry_test.py".into(),
                "import urllib.request\n\nwith urllib.request.urlopen(\"https://pypi.org/simple/pytest/\", timeout=20) as answer:\n    print(\"REACHED\", answer.status)\n".into(),
            ),
        ],
        config: json!({}),
        test_command: "make test",
        passed: "REACHED",
    };
    let seen = run(&project, "The tests pass.").await;
    assert!(!seen.bash.contains("REACHED"), "{}", seen.bash);
    assert!(seen.bash.contains("URLError"), "{}", seen.bash);
    assert!(seen.bash.ends_with("exit code: 2"), "{}", seen.bash);
    assert!(
        seen.task
            .contains(&format!("This project's tests: `{}`", project.test_command)),
        "{}",
        seen.task
    );
    assert!(
        seen.texts
            .iter()
            .any(|t| t.starts_with("*Coder:* The tests pass.")
                && t.ends_with("Tests: `make test` failed (exit 2).")),
        "{:?}",
        seen.texts
    );
    seen.env.assert_clean();
}

/// `fixtures/node/package.json`: a Node package `calc` whose tests use uvu, a test runner
/// from npm (a dev dependency).
const PACKAGE_JSON: &str = include_str!("fixtures/node/package.json");

/// The package `calc` with `package_json`, locked by `lock` (one of `fixtures/node/`'s
/// lock files).
fn node_project(package_json: &str, lock: (&str, &str)) -> Vec<(String, String)> {
    vec![
        ("package.json".into(), package_json.into()),
        (lock.0.into(), lock.1.into()),
        (
            "src/calc.js".into(),
            "export const add = (a, b) => a + b;\n".into(),
        ),
        (
            "tests/calc.test.js".into(),
            "import { test } from 'uvu';\nimport * as assert from 'uvu/assert';\nimport { add } from '../src/calc.js';\n\ntest('adds', () => {\n  assert.is(add(1, 2), 3);\n});\n\ntest.run();\n".into(),
        ),
    ]
}

/// Stops the test, saying what to install, when `program` is not where the sandbox's
/// `PATH` (`/usr/local/bin:/usr/bin:/bin`) finds it.
fn require_in_sandbox_path(program: &str) {
    let found = ["/usr/local/bin", "/usr/bin", "/bin"]
        .iter()
        .any(|dir| Path::new(dir).join(program).is_file());
    assert!(
        found,
        "{program} is not in /usr/local/bin, /usr/bin or /bin, where the sandbox finds it: \
         tests/run installs it (npm install -g {program})"
    );
}

/// Whether `dir` holds at least one file, however deep.
fn holds_a_file(dir: &Path) -> bool {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return false;
    };
    entries.filter_map(Result::ok).any(|entry| {
        let path = entry.path();
        match entry.file_type() {
            Ok(kind) if kind.is_dir() => holds_a_file(&path),
            Ok(kind) => kind.is_file(),
            Err(_) => false,
        }
    })
}

#[tokio::test]
async fn node_tests_run_with_a_test_runner_from_npm() {
    let seen = run_the_tests(Project {
        token: "NODE-UVU",
        files: node_project(
            PACKAGE_JSON,
            (
                "package-lock.json",
                include_str!("fixtures/node/package-lock.json"),
            ),
        ),
        // Prepared after the approval (the cold path): the task names the tests there too.
        config: json!({"build": {"prepareAheadIdleMinutes": 0}}),
        test_command: "npm test",
        passed: "Passed:    1",
    })
    .await;
    seen.assert_prepared_by("npm ci");
    // uvu came from the registry into the worktree: the dev dependency the tests need.
    assert!(
        seen.worktree
            .join("node_modules/uvu/package.json")
            .is_file()
    );
}

/// vitest, the test runner many Node projects use, parses modules with WebAssembly
/// (`es-module-lexer`), which Node could not run under the sandbox's address-space limit.
#[tokio::test]
async fn node_tests_run_with_vitest_which_uses_webassembly() {
    let seen = run_the_tests(Project {
        token: "NODE-VITEST",
        files: vec![
            (
                "package.json".into(),
                include_str!("fixtures/node/vitest/package.json").into(),
            ),
            (
                "package-lock.json".into(),
                include_str!("fixtures/node/vitest/package-lock.json").into(),
            ),
            (
                "src/calc.js".into(),
                "export const add = (a, b) => a + b;\n".into(),
            ),
            (
                "tests/calc.test.js".into(),
                "import { expect, test } from 'vitest';\nimport { add } from '../src/calc.js';\n\ntest('adds', () => {\n  expect(add(1, 2)).toBe(3);\n});\n".into(),
            ),
        ],
        config: json!({}),
        test_command: "npm test",
        passed: "Tests  1 passed (1)",
    })
    .await;
    seen.assert_prepared_by("npm ci");
    assert!(
        seen.worktree
            .join("node_modules/es-module-lexer/package.json")
            .is_file()
    );
}

/// Classic yarn (1.x, the `yarn` package on npm): its frozen install fills `node_modules`
/// from the registry, its cache in the worktree's, and `yarn test` runs offline.
#[tokio::test]
async fn node_tests_locked_by_yarn_run_offline_in_the_sandbox() {
    require_in_sandbox_path("yarn");
    let seen = run_the_tests(Project {
        token: "NODE-YARN",
        files: node_project(
            PACKAGE_JSON,
            ("yarn.lock", include_str!("fixtures/node/yarn.lock")),
        ),
        config: json!({}),
        test_command: "yarn test",
        passed: "Passed:    1",
    })
    .await;
    seen.assert_prepared_by("yarn install --frozen-lockfile");
    assert!(
        seen.worktree
            .join("node_modules/uvu/package.json")
            .is_file()
    );
    // What yarn downloaded is in the worktree's cache, not in a HOME gone with the sandbox.
    assert!(holds_a_file(&seen.worktree.join(".codebutler-cache/yarn")));
}

/// The release of yarn 2+ (berry) a project commits and names in `.yarnrc.yml`'s
/// `yarnPath` (what `yarn set version` writes), from the npm registry's `@yarnpkg/cli-dist`.
fn yarn_berry_release(version: &str) -> String {
    let scratch = tempfile::tempdir().unwrap();
    let pack = Command::new("npm")
        .args(["pack", &format!("@yarnpkg/cli-dist@{version}"), "--silent"])
        .current_dir(scratch.path())
        .output()
        .expect("npm is installed");
    assert!(pack.status.success(), "{pack:?}");
    let tarball = String::from_utf8(pack.stdout).unwrap().trim().to_owned();
    let untar = Command::new("tar")
        .args(["xzf", &tarball, "package/bin/yarn.js"])
        .current_dir(scratch.path())
        .status()
        .unwrap();
    assert!(untar.success());
    std::fs::read_to_string(scratch.path().join("package/bin/yarn.js")).unwrap()
}

/// Yarn 2+ (berry), as a project that commits its release runs it: the yarn installed hands
/// over to `yarnPath`, which installs Plug'n'Play from the lock; its cache must be the
/// worktree's (berry's own is in the sandbox's HOME, gone when the tests run).
#[tokio::test]
async fn node_tests_locked_by_yarn_berry_run_offline_in_the_sandbox() {
    require_in_sandbox_path("yarn");
    let release = ".yarn/releases/yarn-4.5.3.cjs";
    let mut files = node_project(
        PACKAGE_JSON,
        ("yarn.lock", include_str!("fixtures/node/berry/yarn.lock")),
    );
    files.extend([
        (".yarnrc.yml".to_owned(), format!("yarnPath: {release}\n")),
        (release.to_owned(), yarn_berry_release("4.5.3")),
        // Berry's own advice for a project without zero-installs.
        (
            ".gitignore".to_owned(),
            ".yarn/*\n!.yarn/releases\n.pnp.*\n".to_owned(),
        ),
    ]);
    let seen = run_the_tests(Project {
        token: "NODE-BERRY",
        files,
        // Berry reads no `.npmrc`: a host whose npm trusts its CA through npmrc's `cafile`
        // gives berry the same file (the system's bundle here).
        config: json!({"build": {"env": {
            "YARN_HTTPS_CA_FILE_PATH": "/etc/ssl/certs/ca-certificates.crt"
        }}}),
        test_command: "yarn test",
        passed: "Passed:    1",
    })
    .await;
    seen.assert_prepared_by("yarn install --frozen-lockfile");
    // Plug'n'Play, no node_modules: uvu is a zip in the worktree's cache.
    assert!(seen.worktree.join(".pnp.cjs").is_file());
    let cache = std::fs::read_dir(seen.worktree.join(".codebutler-cache/yarn")).unwrap();
    let zips: Vec<String> = cache
        .filter_map(Result::ok)
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    assert!(
        zips.iter()
            .any(|z| z.starts_with("uvu-npm-0.5.6-") && z.ends_with(".zip")),
        "{zips:?}"
    );
}

/// pnpm, in a project that names its own pnpm version in `packageManager`, as most do: the
/// pnpm installed runs it (a version pnpm downloaded for it would be in the sandbox's HOME,
/// gone when the tests run), its frozen install links `node_modules` to a store in the
/// worktree's cache.
#[tokio::test]
async fn node_tests_locked_by_pnpm_run_offline_in_the_sandbox() {
    require_in_sandbox_path("pnpm");
    let package_json = PACKAGE_JSON.replace(
        "\"private\": true,",
        "\"private\": true,\n  \"packageManager\": \"pnpm@10.0.0\",",
    );
    assert_ne!(package_json, PACKAGE_JSON);
    let seen = run_the_tests(Project {
        token: "NODE-PNPM",
        files: node_project(
            &package_json,
            (
                "pnpm-lock.yaml",
                include_str!("fixtures/node/pnpm-lock.yaml"),
            ),
        ),
        config: json!({}),
        test_command: "pnpm test",
        passed: "Passed:    1",
    })
    .await;
    seen.assert_prepared_by("pnpm install --frozen-lockfile");
    // node_modules/uvu leads into pnpm's virtual store inside the worktree.
    let worktree = std::fs::canonicalize(&seen.worktree).unwrap();
    let real = std::fs::canonicalize(worktree.join("node_modules/uvu")).unwrap();
    assert!(
        real.starts_with(worktree.join("node_modules/.pnpm")),
        "{}",
        real.display()
    );
    assert!(real.join("package.json").is_file());
    assert!(holds_a_file(&seen.worktree.join(".codebutler-cache/pnpm")));
}

#[tokio::test]
async fn rust_tests_build_offline_with_a_dev_dependency_from_crates_io() {
    // No `sandbox.readOnly`, no `build.path`: rustup, installed in the home the service's
    // PATH leads to, is found and shown to the sandbox.
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
        config: json!({}),
        test_command: "cargo test --offline",
        passed: "test tests::adds_and_refuses_overflow ... ok",
    })
    .await;
    seen.assert_prepared_by("cargo fetch");
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
    seen.assert_prepared_by("go mod download");
    assert!(
        seen.worktree
            .join(".codebutler-cache/go/pkg/mod/github.com/google/go-cmp@v0.5.9/cmp/compare.go")
            .is_file()
    );
}
