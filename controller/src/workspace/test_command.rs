//! The project's test command, which the Coder is told in its task ("This project's
//! tests: `python -m pytest -q`") and which a run's summary looks for among its Bash
//! calls.
//!
//! Decided as a developer joining the project would on day one, from the base commit's
//! files ([`ProjectFiles`]): `build.testCommand` when the operator set one; else the test
//! step of the repository's CI workflow (a `run` line that is a test command, or the one
//! line of a step named for tests — not `tox`/`nox`, which build environments of their own
//! from the network the sandbox lacks, and without the `poetry run`/`uv run` wrappers the
//! sandbox has no tool for); else the `Makefile`'s `test` target, `package.json`'s `test`
//! script (with yarn or pnpm when their lock file is there), pytest or `unittest` when the
//! Python files say so ([`python_deps::tests_of`]), `cargo test --offline`, `go test ./...`.
//!
//! Pure and table-tested; [`is_test_command`] recognises a test command in a Bash call.

use super::ci_workflow;
use super::project_files::{ProjectFiles, WORKFLOWS_DIR};
use super::python_deps::{self, PythonTests};

/// Programs that run a project's tests, as the first word of a command (after `cd …&&`,
/// `env …`, `timeout N` and the like).
const TEST_RUNNERS: [&str; 11] = [
    "pytest", "py.test", "tox", "nox", "jest", "vitest", "mocha", "ava", "rspec", "ctest",
    "phpunit",
];
/// Wrappers a CI line runs the tests through that the sandbox has no tool for; the venv's
/// or the system's command runs the same tests.
const RUN_WRAPPERS: [&str; 5] = [
    "poetry run ",
    "uv run ",
    "pipenv run ",
    "pdm run ",
    "hatch run ",
];

/// The command the Coder is told runs the project's tests: `configured`
/// (`build.testCommand`) when set, else detected from `files`; `None` when nothing says.
pub fn detect(files: &ProjectFiles, configured: Option<&str>) -> Option<String> {
    if let Some(command) = configured {
        return Some(command.trim().to_owned());
    }
    from_ci(files)
        .or_else(|| from_makefile(files))
        .or_else(|| from_package_json(files))
        .or_else(|| {
            python_deps::tests_of(files).map(|tests| match tests {
                PythonTests::Pytest => "python -m pytest -q".to_owned(),
                PythonTests::Unittest => "python -m unittest".to_owned(),
            })
        })
        .or_else(|| {
            files
                .has("Cargo.toml")
                .then(|| "cargo test --offline".to_owned())
        })
        .or_else(|| files.has("go.mod").then(|| "go test ./...".to_owned()))
}

/// The one line the Coder's task gets.
pub fn task_line(command: &str) -> String {
    format!("This project's tests: `{command}`")
}

/// The first test command the workflows run, files in name order.
fn from_ci(files: &ProjectFiles) -> Option<String> {
    for (_, text) in files.files_in(WORKFLOWS_DIR) {
        for step in ci_workflow::run_steps(text) {
            let lines: Vec<&str> = step
                .run
                .lines()
                .map(str::trim)
                .filter(|l| !l.is_empty() && !l.starts_with('#'))
                .collect();
            let usable = |line: &str| !line.contains("${{") && !line.ends_with('\\');
            let found = lines
                .iter()
                .copied()
                .filter(|l| usable(l))
                .map(unwrap_runner)
                .find(|l| is_test_command(l, None) && !builds_its_own_env(l));
            if let Some(line) = found {
                return Some(line);
            }
            let named_for_tests = step.name.as_deref().is_some_and(|n| {
                n.to_lowercase()
                    .split(|c: char| !c.is_alphanumeric())
                    .any(|w| w == "test" || w == "tests")
            });
            if named_for_tests
                && let [line] = lines.as_slice()
                && usable(line)
                && !builds_its_own_env(line)
            {
                return Some(unwrap_runner(line));
            }
        }
    }
    None
}

/// `line` without a `poetry run`/`uv run`/… wrapper in front.
fn unwrap_runner(line: &str) -> String {
    RUN_WRAPPERS
        .iter()
        .find_map(|w| line.strip_prefix(w))
        .unwrap_or(line)
        .trim()
        .to_owned()
}

/// Whether a command makes environments of its own from the network (tox, nox).
fn builds_its_own_env(line: &str) -> bool {
    commands_of(line).any(|words| matches!(program_of(&words), Some("tox" | "nox")))
}

/// `make test` when the Makefile has a `test` target.
fn from_makefile(files: &ProjectFiles) -> Option<String> {
    let text = ["Makefile", "makefile", "GNUmakefile"]
        .iter()
        .find_map(|name| files.text(name))?;
    text.lines()
        .any(|line| {
            line.strip_prefix("test")
                .map(str::trim_start)
                .is_some_and(|rest| rest.starts_with(':') && !rest.starts_with(":="))
        })
        .then(|| "make test".to_owned())
}

/// `npm test` (or yarn's or pnpm's, by lock file) when `package.json` has a real `test`
/// script (not npm's placeholder that only fails).
fn from_package_json(files: &ProjectFiles) -> Option<String> {
    let text = files.text("package.json")?;
    let package: serde_json::Value = serde_json::from_str(text).ok()?;
    let script = package.get("scripts")?.get("test")?.as_str()?;
    if script.trim().is_empty() || script.contains("no test specified") {
        return None;
    }
    Some(if files.has("yarn.lock") {
        "yarn test".to_owned()
    } else if files.has("pnpm-lock.yaml") {
        "pnpm test".to_owned()
    } else {
        "npm test".to_owned()
    })
}

/// The simple commands of a shell line, each as its words, split at `&&`, `||`, `;`, `|`
/// and newlines outside quotes. Rough on purpose: it reads what a model typed, to tell
/// whether it ran tests.
fn commands_of(line: &str) -> impl Iterator<Item = Vec<String>> {
    let mut commands = Vec::new();
    let mut words: Vec<String> = Vec::new();
    let mut word = String::new();
    let mut quote: Option<char> = None;
    let mut chars = line.chars().peekable();
    let end_word = |word: &mut String, words: &mut Vec<String>| {
        if !word.is_empty() {
            words.push(std::mem::take(word));
        }
    };
    while let Some(c) = chars.next() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), c) => word.push(c),
            (None, '\'' | '"') => quote = Some(c),
            (None, '\\') => {
                if let Some(next) = chars.next() {
                    word.push(next);
                }
            }
            (None, ' ' | '\t') => end_word(&mut word, &mut words),
            (None, '&' | '|' | ';' | '\n' | '(' | ')') => {
                end_word(&mut word, &mut words);
                if !words.is_empty() {
                    commands.push(std::mem::take(&mut words));
                }
            }
            (None, c) => word.push(c),
        }
    }
    end_word(&mut word, &mut words);
    if !words.is_empty() {
        commands.push(words);
    }
    commands.into_iter()
}

/// The program a simple command runs, past variable assignments and the wrappers that
/// run another command (`env`, `timeout 600`, `nice`, `xvfb-run`, `poetry run` …).
fn program_of(words: &[String]) -> Option<&str> {
    let mut rest = words;
    loop {
        let (first, tail) = rest.split_first()?;
        let first = first.as_str();
        if first.contains('=') && !first.starts_with('-') {
            rest = tail;
            continue;
        }
        match first {
            "env" | "nice" | "xvfb-run" | "command" | "exec" | "time" | "sudo" => rest = tail,
            "timeout" => rest = tail.get(1..).unwrap_or_default(),
            "poetry" | "uv" | "pipenv" | "pdm" | "hatch"
                if tail.first().map(String::as_str) == Some("run") =>
            {
                rest = &tail[1..];
            }
            _ => return Some(first.rsplit('/').next().unwrap_or(first)),
        }
    }
}

/// Whether a simple command (as its words) runs a project's tests.
fn runs_tests(words: &[String]) -> bool {
    let Some(program) = program_of(words) else {
        return false;
    };
    let at = words
        .iter()
        .position(|w| w.rsplit('/').next() == Some(program))
        .unwrap_or(0);
    let args: Vec<&str> = words[at + 1..].iter().map(String::as_str).collect();
    let first = args.first().copied();
    if TEST_RUNNERS.contains(&program) {
        return true;
    }
    match program {
        p if p.starts_with("python") => args
            .windows(2)
            .any(|w| w[0] == "-m" && matches!(w[1], "pytest" | "unittest" | "nose2" | "tox")),
        "npm" | "yarn" | "pnpm" | "bun" => match first {
            Some("test" | "t" | "tst") => true,
            Some("run" | "run-script") => args.get(1).is_some_and(|s| s.starts_with("test")),
            Some(script) => program != "npm" && script.starts_with("test"),
            None => false,
        },
        "npx" => first.is_some_and(|tool| TEST_RUNNERS.contains(&tool)),
        "node" | "deno" => args.contains(&"--test") || first == Some("test"),
        "cargo" => matches!(first, Some("test" | "nextest")),
        "go" | "mvn" | "gradle" | "./gradlew" | "gradlew" | "dotnet" | "swift" | "mix" => {
            first == Some("test")
        }
        "make" | "just" | "task" => args.iter().any(|a| {
            matches!(
                *a,
                "test" | "tests" | "check" | "unit" | "test-unit" | "unittest"
            )
        }),
        _ => false,
    }
}

/// Whether the Bash command `command` runs the project's tests: `project` (the project's
/// test command) anywhere in it, or a simple command that is a test command (`pytest`,
/// `python -m pytest`, `npm test`, `cargo test`, `go test`, `make test` …).
pub fn is_test_command(command: &str, project: Option<&str>) -> bool {
    if let Some(project) = project
        && !project.trim().is_empty()
        && command.contains(project.trim())
    {
        return true;
    }
    commands_of(command).any(|words| runs_tests(&words))
}

/// Whether the exit status of `command` is that of its tests: no test command is followed
/// by another command whose status would stand in for it (`| tail`, `; echo`, `|| true`),
/// only by `&&` (which runs the next command only when the tests passed).
pub fn status_is_the_tests(command: &str, project: Option<&str>) -> bool {
    // The separators after the last test command, outside quotes.
    let mut separators = Vec::new();
    let mut quote: Option<char> = None;
    let mut current = String::new();
    let mut segments: Vec<(String, Option<String>)> = Vec::new();
    let chars: Vec<char> = command.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        match (quote, c) {
            (Some(q), c) if c == q => {
                quote = None;
                current.push(c);
            }
            (Some(_), c) => current.push(c),
            (None, '\'' | '"') => {
                quote = Some(c);
                current.push(c);
            }
            (None, '&' | '|' | ';' | '\n') => {
                let two = chars.get(i + 1) == Some(&c) && c != ';' && c != '\n';
                let sep = if two {
                    i += 1;
                    format!("{c}{c}")
                } else {
                    c.to_string()
                };
                // `2>&1` and `&>` are redirections, not separators.
                if c == '&' && !two && (current.ends_with('>') || chars.get(i + 1) == Some(&'>')) {
                    current.push(c);
                } else {
                    segments.push((std::mem::take(&mut current), Some(sep.clone())));
                    separators.push(sep);
                }
            }
            (None, c) => current.push(c),
        }
        i += 1;
    }
    segments.push((current, None));
    let Some(last_test) = segments
        .iter()
        .rposition(|(text, _)| is_test_command(text, project))
    else {
        return false;
    };
    segments[last_test..]
        .iter()
        .filter_map(|(_, sep)| sep.as_deref())
        .zip(segments[last_test + 1..].iter())
        .all(|(sep, (next, _))| sep == "&&" || next.trim().is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Files by path.
    type Files = Vec<(&'static str, &'static str)>;

    #[test]
    fn the_test_command_comes_from_the_first_place_that_says_it() {
        let workflow = "jobs:\n  test:\n    steps:\n      - run: pip install -e .\n      - name: Tests\n        run: poetry run pytest -q tests/\n";
        let cases: Vec<(Files, Option<&str>, Option<&str>)> = vec![
            (vec![("README.md", "hi")], None, None),
            // The operator's wins.
            (
                vec![("go.mod", "module x")],
                Some("make ci "),
                Some("make ci"),
            ),
            // CI's test step, its wrapper dropped; before the Makefile.
            (
                vec![
                    (".github/workflows/ci.yml", workflow),
                    ("Makefile", "test:\n\tpytest\n"),
                ],
                None,
                Some("pytest -q tests/"),
            ),
            // A step named for tests with one line that is not a known runner.
            (
                vec![(
                    ".github/workflows/ci.yml",
                    "jobs:\n  a:\n    steps:\n      - name: Unit tests\n        run: ./scripts/check.sh\n",
                )],
                None,
                Some("./scripts/check.sh"),
            ),
            // tox builds environments from the network; an expression needs GitHub.
            (
                vec![
                    (
                        ".github/workflows/ci.yml",
                        "jobs:\n  a:\n    steps:\n      - run: tox -e py\n      - name: test\n        run: pytest ${{ matrix.args }}\n",
                    ),
                    ("tests/test_a.py", "def test_a(): pass\n"),
                ],
                None,
                Some("python -m pytest -q"),
            ),
            (
                vec![
                    ("Makefile", "VAR := 1\ntest: build\n\tgo test ./...\n"),
                    ("go.mod", ""),
                ],
                None,
                Some("make test"),
            ),
            (
                vec![("Makefile", "test := 1\n"), ("go.mod", "")],
                None,
                Some("go test ./..."),
            ),
            (
                vec![("package.json", r#"{"scripts":{"test":"uvu tests"}}"#)],
                None,
                Some("npm test"),
            ),
            (
                vec![
                    ("package.json", r#"{"scripts":{"test":"jest"}}"#),
                    ("yarn.lock", ""),
                ],
                None,
                Some("yarn test"),
            ),
            (
                vec![
                    ("package.json", r#"{"scripts":{"test":"vitest"}}"#),
                    ("pnpm-lock.yaml", ""),
                ],
                None,
                Some("pnpm test"),
            ),
            // npm's placeholder is no test.
            (
                vec![(
                    "package.json",
                    r#"{"scripts":{"test":"echo \"Error: no test specified\" && exit 1"}}"#,
                )],
                None,
                None,
            ),
            (
                vec![("requirements-dev.txt", "pytest\n")],
                None,
                Some("python -m pytest -q"),
            ),
            (
                vec![("tests/test_a.py", "import unittest\n")],
                None,
                Some("python -m unittest"),
            ),
            (
                vec![("Cargo.toml", "[package]")],
                None,
                Some("cargo test --offline"),
            ),
            (vec![("go.mod", "module x")], None, Some("go test ./...")),
        ];
        for (files, configured, expected) in cases {
            assert_eq!(
                detect(&ProjectFiles::from_files(&files), configured).as_deref(),
                expected,
                "{files:?}"
            );
        }
    }

    #[test]
    fn test_commands_are_recognised_in_what_the_coder_typed() {
        for (command, is_test) in [
            ("python -m pytest -q", true),
            (
                "cd /workspace && .venv/bin/python -m pytest tests/test_a.py -x 2>&1 | tail -30",
                true,
            ),
            ("pytest", true),
            ("timeout 600 env CI=1 cargo test --offline -p x", true),
            ("npm test", true),
            ("npm run test:unit", true),
            ("yarn test", true),
            ("npx jest --ci", true),
            ("go test ./... -run TestX", true),
            ("make test", true),
            ("node --test", true),
            ("uv run pytest", true),
            ("ls -la", false),
            ("cat tests/test_a.py", false),
            ("grep -rn pytest .", false),
            ("echo 'pytest'", false),
            ("pip install pytest", false),
            ("cargo build", false),
            ("npm install", false),
            ("git log --oneline | head", false),
        ] {
            assert_eq!(is_test_command(command, None), is_test, "{command}");
        }
        assert!(is_test_command(
            "./run-tests.sh --fast",
            Some("./run-tests.sh")
        ));
    }

    #[test]
    fn the_exit_status_is_the_tests_only_when_nothing_stands_in_for_it() {
        for (command, theirs) in [
            ("python -m pytest -q", true),
            ("cd x && pytest", true),
            ("pytest 2>&1", true),
            ("pytest &> out.txt", true),
            ("pytest && echo ok", true),
            ("pytest -q 2>&1 | tail -20", false),
            ("pytest; echo done", false),
            ("pytest || true", false),
            ("cargo test; cargo test -- --ignored", true),
            ("echo 'a | b' && go test ./...", true),
        ] {
            assert_eq!(status_is_the_tests(command, None), theirs, "{command}");
        }
    }
}
