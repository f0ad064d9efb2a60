//! What a Python worktree's preparation installs, so the Coder can run the project's tests
//! in the sandbox, which has no network: the project itself and its test and development
//! dependencies, from whichever of the usual declarations the repository uses —
//! `requirements*.txt` files for development and tests, `[project.optional-dependencies]`
//! extras and PEP 735 `[dependency-groups]` named for tests or development, Poetry's
//! groups, the `deps` of `tox.ini`'s test environments, `setup.cfg`'s extras and
//! `tests_require`, a `Pipfile`'s packages — at the versions `uv.lock` or `poetry.lock` pin when the repository has
//! one. When the tests plainly use pytest and nothing installed declares it, pytest is
//! installed too, and the thread is told.
//!
//! Pure: [`plan`] reads [`ProjectFiles`] (the committed declarations) and says what to
//! install; [`super::platform`] renders it as the init's shell command. A group or extra
//! counts as one for tests or development when a word of its name is one of [`DEV_WORDS`]
//! (`test`, `tests-extra`, `dev`, `ci` …), as a developer would pick them on day one.

use std::collections::{BTreeMap, BTreeSet};

use toml::{Table, Value};

use super::ini;
use super::project_files::{ProjectFiles, is_requirements_file};
use super::python_locks::{normalise, poetry_locked, uv_locked};

/// Words that make a group, an extra or a requirements file one for tests or development.
pub const DEV_WORDS: [&str; 9] = [
    "test",
    "tests",
    "testing",
    "dev",
    "devel",
    "develop",
    "development",
    "ci",
    "pytest",
];
/// How deep `{include-group = …}` and `-r` includes are followed.
const MAX_INCLUDE_DEPTH: usize = 8;

/// How the project's tests are run, as its files show.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PythonTests {
    /// pytest: declared, configured, imported by the tests, or tests written in its style.
    Pytest,
    /// The tests are `unittest` test cases and nothing says pytest.
    Unittest,
}

/// What the preparation installs into the worktree's `.venv`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PythonInstall {
    /// How it is installed.
    pub installer: Installer,
    /// What the thread is told beside the command (each a short clause).
    pub notes: Vec<String>,
}

/// How the project's dependencies are installed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Installer {
    /// `uv sync --frozen` from `uv.lock` (when `uv` is there), with these extras and groups,
    /// then `extra` with `uv pip install`.
    UvSync {
        extras: Vec<String>,
        groups: Vec<String>,
        extra: Vec<String>,
    },
    /// `pip install` into `.venv` with `args` (each one shell word), constrained to `pins`
    /// (`name==version` from a lock file) when there are any.
    Pip { args: Vec<String>, pins: Pins },
}

/// Versions a lock file pins, given to pip as constraints.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Pins {
    /// The lock file (`uv.lock`, `poetry.lock`).
    pub from: Option<&'static str>,
    /// `name==version`, sorted.
    pub lines: Vec<String>,
}

/// Whether a name (of a group, an extra, a requirements file) is one for tests or
/// development: one of its words is in [`DEV_WORDS`].
pub fn is_dev_name(name: &str) -> bool {
    name.to_lowercase()
        .split(|c: char| !c.is_ascii_alphanumeric())
        .any(|word| DEV_WORDS.contains(&word))
}

/// A requirement's project name, normalised as PyPI compares them (`Foo_Bar` →
/// `foo-bar`); `None` for an option line, a path or a URL.
pub fn requirement_name(requirement: &str) -> Option<String> {
    let requirement = requirement.trim();
    if requirement.starts_with(['-', '.', '/']) || requirement.contains("://") {
        return None;
    }
    let name: String = requirement
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        .collect();
    (!name.is_empty()).then(|| normalise(&name))
}

/// The parsed `pyproject.toml`, when it reads as TOML.
fn pyproject(files: &ProjectFiles) -> Option<Table> {
    let text = files.text("pyproject.toml")?;
    match text.parse::<Table>() {
        Ok(table) => Some(table),
        Err(e) => {
            tracing::info!("pyproject.toml does not read as TOML: {e}");
            None
        }
    }
}

/// The value at the dotted `path` of `table`.
fn at<'a>(table: &'a Table, path: &[&str]) -> Option<&'a Value> {
    let (first, rest) = path.split_first()?;
    let mut value = table.get(*first)?;
    for key in rest {
        value = value.as_table()?.get(*key)?;
    }
    Some(value)
}

/// The strings of an array value.
fn strings(value: Option<&Value>) -> Vec<String> {
    value
        .and_then(Value::as_array)
        .map(|items| {
            items
                .iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default()
}

/// How the project's tests run, from its files: pytest when anything says so (declared
/// among its dependencies, configured, `conftest.py`, imported by a test file, or test
/// files without `unittest`), `unittest` when every test file read is a `unittest` one;
/// `None` without Python test files or a declared pytest.
pub fn tests_of(files: &ProjectFiles) -> Option<PythonTests> {
    let py = pyproject(files);
    let configured = files.has("pytest.ini")
        || py
            .as_ref()
            .is_some_and(|t| at(t, &["tool", "pytest"]).is_some())
        || files
            .text("setup.cfg")
            .is_some_and(|t| ini::parse(t).contains_key("tool:pytest"))
        || files
            .text("tox.ini")
            .is_some_and(|t| ini::parse(t).contains_key("pytest"));
    if configured || mentions_pytest(files, py.as_ref()) {
        return Some(PythonTests::Pytest);
    }
    let mut tests = files.python_tests().peekable();
    tests.peek()?;
    let mut all_unittest = true;
    for (path, text) in tests {
        if path.ends_with("conftest.py") {
            return Some(PythonTests::Pytest);
        }
        let Some(text) = text else { continue };
        if imports(text, "pytest") {
            return Some(PythonTests::Pytest);
        }
        all_unittest &= imports(text, "unittest");
    }
    Some(if all_unittest {
        PythonTests::Unittest
    } else {
        PythonTests::Pytest
    })
}

/// Whether Python source `text` imports `module` (`import m`, `from m …`).
fn imports(text: &str, module: &str) -> bool {
    text.lines().any(|line| {
        let line = line.trim_start();
        let rest = line
            .strip_prefix("import ")
            .or_else(|| line.strip_prefix("from "));
        rest.is_some_and(|r| {
            let name = r.trim_start();
            name.strip_prefix(module)
                .is_some_and(|after| after.is_empty() || after.starts_with([' ', '.', ',', ';']))
        })
    })
}

/// Whether any declaration of the project names pytest or a pytest plugin.
fn mentions_pytest(files: &ProjectFiles, py: Option<&Table>) -> bool {
    let mut all = Declared::default();
    if let Some(py) = py {
        all.everything_in(py);
    }
    for (path, text) in files.files_in("").chain(files.files_in("requirements")) {
        let name = path.rsplit('/').next().unwrap_or(path);
        if path.starts_with("requirements/") || is_requirements_file(name) {
            all.add_lines(text.lines());
        }
    }
    if let Some(pipfile) = files.text("Pipfile").and_then(|t| t.parse::<Table>().ok()) {
        for section in ["packages", "dev-packages"] {
            if let Some(packages) = pipfile.get(section).and_then(Value::as_table) {
                for name in packages.keys() {
                    all.add(name);
                }
            }
        }
    }
    if let Some(text) = files.text("tox.ini") {
        for keys in ini::parse(text).values() {
            if let Some(deps) = keys.get("deps") {
                all.add_lines(ini::lines(deps));
            }
        }
    }
    if let Some(text) = files.text("setup.cfg") {
        let cfg = ini::parse(text);
        for keys in cfg
            .get("options.extras_require")
            .into_iter()
            .chain(cfg.get("options"))
        {
            for value in keys.values() {
                all.add_lines(value.split([';', '\n']));
            }
        }
    }
    all.has_pytest()
}

/// Names of the requirements something declares.
#[derive(Debug, Default)]
struct Declared {
    names: BTreeSet<String>,
}

impl Declared {
    fn add(&mut self, requirement: &str) {
        if let Some(name) = requirement_name(requirement) {
            self.names.insert(name);
        }
    }

    fn add_lines<'a>(&mut self, lines: impl Iterator<Item = &'a str>) {
        for line in lines {
            self.add(line);
        }
    }

    /// Every dependency name anywhere in a `pyproject.toml` (for "is pytest declared at
    /// all", not for what is installed).
    fn everything_in(&mut self, py: &Table) {
        for requirement in strings(at(py, &["project", "dependencies"])) {
            self.add(&requirement);
        }
        for path in [
            &["project", "optional-dependencies"][..],
            &["dependency-groups"][..],
        ] {
            if let Some(groups) = at(py, path).and_then(Value::as_table) {
                for value in groups.values() {
                    for requirement in strings(Some(value)) {
                        self.add(&requirement);
                    }
                }
            }
        }
        for requirement in strings(at(py, &["tool", "uv", "dev-dependencies"])) {
            self.add(&requirement);
        }
        let poetry_tables = poetry_groups(py)
            .into_iter()
            .map(|(_, deps, _)| deps)
            .chain(at(py, &["tool", "poetry", "dev-dependencies"]).and_then(Value::as_table));
        for deps in poetry_tables {
            for name in deps.keys() {
                self.add(name);
            }
        }
    }

    fn has_pytest(&self) -> bool {
        self.names
            .iter()
            .any(|n| n == "pytest" || n.starts_with("pytest-"))
    }
}

/// Poetry's groups: name, dependencies, and whether `poetry install` leaves it out
/// (`optional = true`).
fn poetry_groups(py: &Table) -> Vec<(&str, &Table, bool)> {
    let Some(groups) = at(py, &["tool", "poetry", "group"]).and_then(Value::as_table) else {
        return Vec::new();
    };
    groups
        .iter()
        .filter_map(|(name, group)| {
            let group = group.as_table()?;
            let deps = group.get("dependencies")?.as_table()?;
            let optional = group
                .get("optional")
                .and_then(Value::as_bool)
                .unwrap_or(false);
            Some((name.as_str(), deps, optional))
        })
        .collect()
}

/// A Poetry dependency as a pip requirement: its name with its extras, pinned to the
/// lock's version when there is one; `None` for `python` and for dependencies that are
/// not on an index (a path, a git repository, a URL).
fn poetry_requirement(
    name: &str,
    spec: &Value,
    locked: &BTreeMap<String, String>,
) -> Option<String> {
    if name == "python" {
        return None;
    }
    let mut requirement = name.to_owned();
    if let Some(table) = spec.as_table() {
        if ["path", "git", "url", "file"]
            .iter()
            .any(|k| table.contains_key(*k))
        {
            return None;
        }
        let extras = strings(table.get("extras"));
        if !extras.is_empty() {
            requirement = format!("{name}[{}]", extras.join(","));
        }
    }
    if let Some(version) = locked.get(&normalise(name)) {
        requirement.push_str(&format!("=={version}"));
    }
    Some(requirement)
}

/// What [`plan`] gathers.
#[derive(Debug, Default)]
struct Gathered {
    /// Whether the project itself is installed (`-e .`).
    project: bool,
    extras: BTreeSet<String>,
    /// Dependency groups, Poetry's included (for `uv sync`, PEP 735's only).
    groups: BTreeSet<String>,
    /// `-r file` arguments.
    requirement_files: Vec<String>,
    /// Requirement strings.
    requirements: Vec<String>,
    /// What is installed, by name (to tell whether pytest is among it).
    installed: Declared,
    notes: Vec<String>,
}

impl Gathered {
    fn requirement(&mut self, requirement: String) {
        let requirement = requirement.trim().to_owned();
        if requirement.is_empty() || self.requirements.contains(&requirement) {
            return;
        }
        if requirement.starts_with('-') {
            // An option where a requirement belongs would change how pip installs.
            self.notes
                .push(format!("`{requirement}` is not a requirement; left out"));
            return;
        }
        self.installed.add(&requirement);
        self.requirements.push(requirement);
    }

    /// The requirements file at `path` (and those it includes with `-r`, for the names).
    fn requirements_file(&mut self, files: &ProjectFiles, path: &str) {
        if self.requirement_files.iter().any(|p| p == path) {
            return;
        }
        self.requirement_files.push(path.to_owned());
        self.names_of_file(files, path, 0);
    }

    fn names_of_file(&mut self, files: &ProjectFiles, path: &str, depth: usize) {
        let Some(text) = files.text(path) else { return };
        let dir = path.rsplit_once('/').map_or("", |(d, _)| d);
        for line in text.lines() {
            let line = line.trim();
            let included = line
                .strip_prefix("-r")
                .or_else(|| line.strip_prefix("--requirement"))
                .map(|p| p.trim_start_matches([' ', '=']).trim());
            match included {
                Some(inc) if depth < MAX_INCLUDE_DEPTH => {
                    let joined = if dir.is_empty() {
                        inc.to_owned()
                    } else {
                        format!("{dir}/{inc}")
                    };
                    self.names_of_file(files, &joined, depth + 1);
                }
                Some(_) => {}
                None => self.installed.add(line),
            }
        }
    }
}

/// A PEP 735 group's requirements, `{include-group = "…"}` followed (a cycle or a group
/// that does not exist ends the walk there).
fn group_requirements(groups: &Table, name: &str, depth: usize, out: &mut Vec<String>) {
    if depth > MAX_INCLUDE_DEPTH {
        return;
    }
    let Some(items) = groups.get(name).and_then(Value::as_array) else {
        return;
    };
    for item in items {
        match item {
            Value::String(requirement) => out.push(requirement.clone()),
            Value::Table(include) => {
                if let Some(other) = include.get("include-group").and_then(Value::as_str) {
                    group_requirements(groups, other, depth + 1, out);
                }
            }
            _ => {}
        }
    }
}

/// What to install for the Python project whose files are `files`; `has_uv` says whether
/// `uv` is where the sandbox can run it.
pub fn plan(files: &ProjectFiles, has_uv: bool) -> PythonInstall {
    let py = pyproject(files);
    let mut g = Gathered::default();
    if files.has("pyproject.toml") && py.is_none() {
        g.notes.push(
            "`pyproject.toml` is not a readable TOML file, so what it declares was not installed"
                .into(),
        );
    }
    let table = py.clone().unwrap_or_default();
    g.project = installable(files, &table, py.is_some());
    let cfg = files.text("setup.cfg").map(ini::parse).unwrap_or_default();
    g.add_extras(&table, &cfg);
    g.add_requirements_files(files);
    g.add_dependency_groups(&table);
    let poetry_lock = poetry_locked(files);
    g.add_poetry_groups(&table, &poetry_lock);
    g.add_pipfile(files);
    // tox's test environments: `[testenv]`, and `[testenv:<name>]` for tests.
    let tox = files.text("tox.ini").map(ini::parse).unwrap_or_default();
    for (section, keys) in &tox {
        let for_tests =
            section == "testenv" || section.strip_prefix("testenv:").is_some_and(is_dev_name);
        if for_tests && let Some(deps) = keys.get("deps") {
            tox_deps(deps, files, &mut g);
        }
    }
    if g.project {
        for requirement in strings(at(&table, &["project", "dependencies"])) {
            g.installed.add(&requirement);
        }
    }
    let pytest_needed = tests_of(files) == Some(PythonTests::Pytest) && !g.installed.has_pytest();
    let installer = if has_uv && files.text("uv.lock").is_some() {
        g.uv_sync(pytest_needed)
    } else {
        let uv_lock = uv_locked(files);
        let pins = if !uv_lock.is_empty() {
            Pins::of("uv.lock", uv_lock)
        } else if !poetry_lock.is_empty() {
            Pins::of("poetry.lock", poetry_lock)
        } else {
            Pins::default()
        };
        g.pip(pins, pytest_needed)
    };
    let mut notes = g.notes;
    if pytest_needed {
        notes.push("pytest, not declared, installed".into());
    }
    PythonInstall { installer, notes }
}

/// Whether pip can install the project itself (`-e .`): a `pyproject.toml` that declares a
/// project or its build (or cannot be read, so pip decides), or a `setup.py`, unless it
/// opts out (`tool.uv.package = false`, Poetry's `package-mode = false`). `setup.cfg` alone
/// is no project to pip.
fn installable(files: &ProjectFiles, table: &Table, readable: bool) -> bool {
    let poetry = at(table, &["tool", "poetry"]).and_then(Value::as_table);
    let packaged = table.contains_key("project")
        || table.contains_key("build-system")
        || poetry.is_some_and(|p| p.contains_key("name"));
    let opted_out = at(table, &["tool", "uv", "package"]).and_then(Value::as_bool) == Some(false)
        || poetry
            .and_then(|p| p.get("package-mode"))
            .and_then(Value::as_bool)
            == Some(false);
    (packaged || files.has("setup.py") || (files.has("pyproject.toml") && !readable)) && !opted_out
}

impl Pins {
    fn of(from: &'static str, locked: BTreeMap<String, String>) -> Self {
        Self {
            from: Some(from),
            lines: locked
                .into_iter()
                .map(|(name, version)| format!("{name}=={version}"))
                .collect(),
        }
    }
}

impl Gathered {
    /// The extras for tests or development (`[project.optional-dependencies]`, `setup.cfg`'s
    /// `extras_require`), installed with the project (`.[test]`), or their requirements one
    /// by one when pip cannot install the project; `setup.cfg`'s `tests_require`.
    fn add_extras(&mut self, table: &Table, cfg: &ini::Sections) {
        let mut extras: Vec<(String, Vec<String>)> = Vec::new();
        if let Some(declared) =
            at(table, &["project", "optional-dependencies"]).and_then(Value::as_table)
        {
            for (name, requirements) in declared {
                extras.push((name.clone(), strings(Some(requirements))));
            }
        }
        if let Some(declared) = cfg.get("options.extras_require") {
            for (name, value) in declared {
                let requirements = value.split([';', '\n']).map(|r| r.trim().to_owned());
                extras.push((
                    name.clone(),
                    requirements.filter(|r| !r.is_empty()).collect(),
                ));
            }
        }
        for (name, requirements) in extras.into_iter().filter(|(n, _)| is_dev_name(n)) {
            if self.project {
                self.extras.insert(name);
                for requirement in &requirements {
                    self.installed.add(requirement);
                }
            } else {
                for requirement in requirements {
                    self.requirement(requirement);
                }
            }
        }
        if let Some(tests_require) = cfg.get("options").and_then(|o| o.get("tests_require")) {
            for requirement in tests_require.split([';', '\n']) {
                self.requirement(requirement.to_owned());
            }
        }
    }

    /// `requirements.txt`, and the requirements files for tests or development at the top
    /// level and in `requirements/`.
    fn add_requirements_files(&mut self, files: &ProjectFiles) {
        let top = files.files_in("").map(|(path, _)| path).filter(|path| {
            *path == "requirements.txt"
                || (is_requirements_file(path) && is_dev_name(&path.replace("requirements", "")))
        });
        let in_dir = files
            .files_in("requirements")
            .map(|(path, _)| path)
            .filter(|path| {
                is_dev_name(
                    path.trim_start_matches("requirements/")
                        .trim_end_matches(".txt"),
                )
            });
        let paths: Vec<String> = top.chain(in_dir).map(str::to_owned).collect();
        for path in paths {
            self.requirements_file(files, &path);
        }
    }

    /// PEP 735 groups for tests or development, and uv's older `dev-dependencies`.
    fn add_dependency_groups(&mut self, table: &Table) {
        if let Some(groups) = at(table, &["dependency-groups"]).and_then(Value::as_table) {
            for name in groups.keys().filter(|n| is_dev_name(n)) {
                self.groups.insert(name.clone());
                let mut requirements = Vec::new();
                group_requirements(groups, name, 0, &mut requirements);
                for requirement in requirements {
                    self.requirement(requirement);
                }
            }
        }
        for requirement in strings(at(table, &["tool", "uv", "dev-dependencies"])) {
            self.requirement(requirement);
        }
    }

    /// Poetry: the groups `poetry install` installs (all but optional ones) and optional ones
    /// for tests or development, and the old `dev-dependencies`, at the lock's versions.
    fn add_poetry_groups(&mut self, table: &Table, locked: &BTreeMap<String, String>) {
        for (name, deps, optional) in poetry_groups(table) {
            if optional && !is_dev_name(name) {
                continue;
            }
            for (dep, spec) in deps {
                match poetry_requirement(dep, spec, locked) {
                    Some(requirement) => self.requirement(requirement),
                    None if dep != "python" => self.notes.push(format!(
                        "`{dep}` (not from a package index) was not installed"
                    )),
                    None => {}
                }
            }
        }
        if let Some(deps) =
            at(table, &["tool", "poetry", "dev-dependencies"]).and_then(Value::as_table)
        {
            for (dep, spec) in deps {
                if let Some(requirement) = poetry_requirement(dep, spec, locked) {
                    self.requirement(requirement);
                }
            }
        }
    }

    /// A `Pipfile`'s `[packages]` and `[dev-packages]` (what `pipenv install --dev`
    /// installs), each with its version when it gives one (`"*"` is any); one from a path,
    /// a repository or a URL is left out and said.
    fn add_pipfile(&mut self, files: &ProjectFiles) {
        let Some(pipfile) = files.text("Pipfile").and_then(|t| t.parse::<Table>().ok()) else {
            return;
        };
        for section in ["packages", "dev-packages"] {
            let Some(packages) = pipfile.get(section).and_then(Value::as_table) else {
                continue;
            };
            for (name, spec) in packages {
                let version = match spec {
                    Value::String(v) => Some(v.as_str()),
                    Value::Table(t)
                        if ["path", "git", "file", "url"]
                            .iter()
                            .any(|k| t.contains_key(*k)) =>
                    {
                        self.notes.push(format!(
                            "`{name}` (not from a package index) was not installed"
                        ));
                        continue;
                    }
                    Value::Table(t) => t.get("version").and_then(Value::as_str),
                    _ => None,
                };
                match version.map(str::trim) {
                    Some(v) if v != "*" && !v.is_empty() => self.requirement(format!("{name}{v}")),
                    _ => self.requirement(name.clone()),
                }
            }
        }
    }

    /// `uv sync` of the lock with the groups and extras gathered (pytest after it when the
    /// tests need it and nothing declares it).
    fn uv_sync(&self, pytest_needed: bool) -> Installer {
        Installer::UvSync {
            extras: self.extras.iter().cloned().collect(),
            groups: self.groups.iter().cloned().collect(),
            extra: if pytest_needed {
                vec!["pytest".to_owned()]
            } else {
                Vec::new()
            },
        }
    }

    /// `pip install` of what was gathered, under `pins`.
    fn pip(&self, pins: Pins, pytest_needed: bool) -> Installer {
        let mut args = Vec::new();
        if self.project {
            args.push("-e".to_owned());
            args.push(if self.extras.is_empty() {
                ".".to_owned()
            } else {
                let extras: Vec<&str> = self.extras.iter().map(String::as_str).collect();
                format!(".[{}]", extras.join(","))
            });
        }
        for path in &self.requirement_files {
            args.push("-r".to_owned());
            args.push(path.clone());
        }
        args.extend(self.requirements.iter().cloned());
        if pytest_needed {
            args.push("pytest".to_owned());
        }
        Installer::Pip { args, pins }
    }
}

/// The `deps` of a `tox.ini` test environment: requirements, and `-r` files as pip
/// arguments.
/// Lines conditional on a factor (`py38: mock`) and lines with a substitution other than
/// `{toxinidir}` are left out (said in the thread): they belong to other environments, or
/// would need tox to expand them.
fn tox_deps(deps: &str, files: &ProjectFiles, g: &mut Gathered) {
    for line in ini::lines(deps) {
        let line = line.split(" #").next().unwrap_or(line).trim();
        let line = line.replace("{toxinidir}/", "").replace("{toxinidir}", ".");
        let factor = line.split_once(':').is_some_and(|(f, _)| {
            !f.is_empty()
                && f.chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, ',' | '!' | '-' | '_'))
                && !line.contains("://")
        });
        if factor || line.contains('{') {
            g.notes.push(format!(
                "`{line}` from tox.ini needs tox to expand it; left out"
            ));
            continue;
        }
        if let Some(path) = line.strip_prefix("-r").map(str::trim) {
            g.requirements_file(files, path);
        } else if line.starts_with("-c") {
            g.notes
                .push(format!("`{line}` from tox.ini (constraints) left out"));
        } else {
            g.requirement(line);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Files by path.
    type Files = Vec<(&'static str, &'static str)>;

    fn pip_args(install: &PythonInstall) -> Vec<String> {
        match &install.installer {
            Installer::Pip { args, .. } => args.clone(),
            other => panic!("not pip: {other:?}"),
        }
    }

    const PYTEST_TEST: (&str, &str) = (
        "tests/test_calc.py",
        "from calc import add\n\ndef test_add():\n    assert add(1, 2) == 3\n",
    );

    #[test]
    fn each_declaration_of_test_dependencies_is_installed() {
        // (files, pip arguments, notes)
        let cases: Vec<(Files, Vec<&str>, Vec<&str>)> = vec![
            // requirements files for development and tests.
            (
                vec![
                    ("pyproject.toml", "[project]\nname = \"calc\"\n"),
                    ("requirements-dev.txt", "pytest>=8\n"),
                    ("requirements.txt", "attrs\n"),
                    ("requirements-docs.txt", "sphinx\n"),
                    (
                        "requirements/test.txt",
                        "-r ../requirements.txt\nhypothesis\n",
                    ),
                    ("requirements/prod.txt", "gunicorn\n"),
                    PYTEST_TEST,
                ],
                vec![
                    "-e",
                    ".",
                    "-r",
                    "requirements-dev.txt",
                    "-r",
                    "requirements.txt",
                    "-r",
                    "requirements/test.txt",
                ],
                vec![],
            ),
            (
                vec![("dev-requirements.txt", "pytest\n"), PYTEST_TEST],
                vec!["-r", "dev-requirements.txt"],
                vec![],
            ),
            // Extras named for tests or development.
            (
                vec![
                    (
                        "pyproject.toml",
                        "[project]\nname = \"calc\"\n[project.optional-dependencies]\ntest = [\"pytest\"]\ndev = [\"black\"]\ndocs = [\"sphinx\"]\n",
                    ),
                    PYTEST_TEST,
                ],
                vec!["-e", ".[dev,test]"],
                vec![],
            ),
            // PEP 735 groups, includes followed; a project without a build is not installed.
            (
                vec![
                    (
                        "pyproject.toml",
                        "[dependency-groups]\ntest = [\"pytest>=8\", {include-group = \"typing\"}]\ntyping = [\"mypy\"]\nlint = [\"ruff\"]\n",
                    ),
                    ("requirements-dev.txt", "coverage\n"),
                    PYTEST_TEST,
                ],
                vec!["-r", "requirements-dev.txt", "pytest>=8", "mypy"],
                vec![],
            ),
            // Poetry's groups at the lock's versions; a path dependency is said.
            (
                vec![
                    (
                        "pyproject.toml",
                        "[tool.poetry]\nname = \"calc\"\n[tool.poetry.dependencies]\npython = \"^3.11\"\n[tool.poetry.group.test.dependencies]\npytest = \"^8.0\"\nlocal = {path = \"../local\"}\n[tool.poetry.group.docs]\noptional = true\n[tool.poetry.group.docs.dependencies]\nsphinx = \"*\"\n[build-system]\nrequires = [\"poetry-core\"]\n",
                    ),
                    (
                        "poetry.lock",
                        "[[package]]\nname = \"pytest\"\nversion = \"8.4.2\"\n[[package]]\nname = \"pluggy\"\nversion = \"1.7.0\"\n[package.source]\ntype = \"legacy\"\nurl = \"https://pypi.org/simple\"\n[[package]]\nname = \"local\"\nversion = \"0.1\"\n[package.source]\ntype = \"directory\"\nurl = \"../local\"\n",
                    ),
                    PYTEST_TEST,
                ],
                vec!["-e", ".", "pytest==8.4.2"],
                vec!["`local` (not from a package index) was not installed"],
            ),
            // tox's test environments (not its docs one).
            (
                vec![
                    ("setup.py", "from setuptools import setup\nsetup()\n"),
                    (
                        "tox.ini",
                        "[tox]\nenvlist = py311\n[testenv]\ndeps =\n    pytest\n    -r{toxinidir}/requirements-test.txt\n    py27: mock\n    {[base]deps}\ncommands = pytest\n[testenv:tests]\ndeps = pytest-timeout\n[testenv:docs]\ndeps = sphinx\n",
                    ),
                    ("requirements-test.txt", "hypothesis\n"),
                    PYTEST_TEST,
                ],
                vec![
                    "-e",
                    ".",
                    "-r",
                    "requirements-test.txt",
                    "pytest",
                    "pytest-timeout",
                ],
                vec![
                    "`py27: mock` from tox.ini needs tox to expand it; left out",
                    "`{[base]deps}` from tox.ini needs tox to expand it; left out",
                ],
            ),
            // setup.cfg extras and tests_require, with the usual setup.py shim.
            (
                vec![
                    (
                        "setup.cfg",
                        "[metadata]\nname = calc\n[options]\ntests_require =\n    mock\n[options.extras_require]\ntesting =\n    pytest\nyaml = pyyaml\n",
                    ),
                    ("setup.py", "from setuptools import setup\nsetup()\n"),
                    PYTEST_TEST,
                ],
                vec!["-e", ".[testing]", "mock"],
                vec![],
            ),
            // setup.cfg alone is no project to pip: its extras' requirements instead.
            (
                vec![
                    (
                        "setup.cfg",
                        "[metadata]\nname = calc\n[options.extras_require]\ntesting =\n    pytest>=8\n",
                    ),
                    PYTEST_TEST,
                ],
                vec!["pytest>=8"],
                vec![],
            ),
            // Tests in pytest's style, pytest declared nowhere: installed, and said.
            (
                vec![
                    ("pyproject.toml", "[project]\nname = \"calc\"\n"),
                    PYTEST_TEST,
                ],
                vec!["-e", ".", "pytest"],
                vec!["pytest, not declared, installed"],
            ),
            // unittest tests need nothing more.
            (
                vec![
                    ("requirements.txt", "attrs\n"),
                    (
                        "tests/test_calc.py",
                        "import unittest\n\nclass T(unittest.TestCase):\n    pass\n",
                    ),
                ],
                vec!["-r", "requirements.txt"],
                vec![],
            ),
            // A Pipfile's packages, development ones included.
            (
                vec![
                    (
                        "Pipfile",
                        "[packages]\nrequests = \"*\"\n[dev-packages]\npytest = \">=8\"\nlocal = {path = \".\"}\nblack = {version = \"==24.1.0\"}\n",
                    ),
                    PYTEST_TEST,
                ],
                vec!["requests", "black==24.1.0", "pytest>=8"],
                vec!["`local` (not from a package index) was not installed"],
            ),
            // An option in a list of requirements is left out, and said.
            (
                vec![(
                    "pyproject.toml",
                    "[dependency-groups]\ndev = [\"--index-url=http://evil.example\", \"pytest\"]\n",
                )],
                vec!["pytest"],
                vec!["`--index-url=http://evil.example` is not a requirement; left out"],
            ),
        ];
        for (files, args, notes) in cases {
            let project = ProjectFiles::from_files(&files);
            let install = plan(&project, false);
            assert_eq!(pip_args(&install), args, "{files:?}");
            assert_eq!(install.notes, notes, "{files:?}");
        }
    }

    #[test]
    fn a_lock_pins_what_pip_installs_and_uv_syncs_when_it_is_there() {
        let pyproject = "[project]\nname = \"calc\"\n[dependency-groups]\ndev = [\"pytest>=8\"]\n[build-system]\nrequires = [\"hatchling\"]\n";
        let lock = "version = 1\n[[package]]\nname = \"calc\"\nversion = \"0.1.0\"\nsource = { editable = \".\" }\n[[package]]\nname = \"pytest\"\nversion = \"8.3.4\"\nsource = { registry = \"https://pypi.org/simple\" }\n[[package]]\nname = \"Typing_Extensions\"\nversion = \"4.12.2\"\nsource = { registry = \"https://pypi.org/simple\" }\n[[package]]\nname = \"numpy\"\nversion = \"1.24.4\"\nsource = { registry = \"https://pypi.org/simple\" }\n[[package]]\nname = \"numpy\"\nversion = \"2.2.0\"\nsource = { registry = \"https://pypi.org/simple\" }\n";
        let files = ProjectFiles::from_files(&[
            ("pyproject.toml", pyproject),
            ("uv.lock", lock),
            PYTEST_TEST,
        ]);
        let install = plan(&files, false);
        assert_eq!(
            install.installer,
            Installer::Pip {
                args: vec!["-e".into(), ".".into(), "pytest>=8".into()],
                pins: Pins {
                    from: Some("uv.lock"),
                    // The project itself and a package locked at two versions are not pinned.
                    lines: vec!["pytest==8.3.4".into(), "typing-extensions==4.12.2".into()],
                },
            }
        );
        assert!(install.notes.is_empty(), "{:?}", install.notes);
        let install = plan(&files, true);
        assert_eq!(
            install.installer,
            Installer::UvSync {
                extras: vec![],
                groups: vec!["dev".into()],
                extra: vec![],
            }
        );
        assert!(install.notes.is_empty());
    }

    #[test]
    fn how_the_tests_run_is_read_from_the_files() {
        let cases: Vec<(Files, Option<PythonTests>)> = vec![
            (vec![("README.md", "")], None),
            (vec![("pyproject.toml", "[project]\nname='x'\n")], None),
            (vec![PYTEST_TEST], Some(PythonTests::Pytest)),
            (
                vec![("test/test_x.py", "import pytest\nimport unittest\n")],
                Some(PythonTests::Pytest),
            ),
            (
                vec![("x_test.py", "import unittest\n")],
                Some(PythonTests::Unittest),
            ),
            (
                vec![("x_test.py", "import unittest\n"), ("conftest.py", "")],
                Some(PythonTests::Pytest),
            ),
            (
                vec![("pytest.ini", "[pytest]\n")],
                Some(PythonTests::Pytest),
            ),
            (
                vec![(
                    "pyproject.toml",
                    "[tool.pytest.ini_options]\naddopts = '-q'\n",
                )],
                Some(PythonTests::Pytest),
            ),
            (
                vec![("setup.cfg", "[tool:pytest]\n")],
                Some(PythonTests::Pytest),
            ),
            (
                vec![("requirements-dev.txt", "pytest-cov\n")],
                Some(PythonTests::Pytest),
            ),
            (
                vec![(
                    "tests/test_a.py",
                    "import unittest\nfrom pytest_mod import x\n",
                )],
                Some(PythonTests::Unittest),
            ),
        ];
        for (files, expected) in cases {
            assert_eq!(
                tests_of(&ProjectFiles::from_files(&files)),
                expected,
                "{files:?}"
            );
        }
    }

    #[test]
    fn names_and_dev_words() {
        assert!(is_dev_name("test"));
        assert!(is_dev_name("Tests-Extra"));
        assert!(is_dev_name("-dev"));
        assert!(!is_dev_name("docs"));
        assert!(!is_dev_name("latest"), "a word, not a substring");
        assert_eq!(
            requirement_name("Typing_Extensions>=4; python_version<'3.11'").as_deref(),
            Some("typing-extensions")
        );
        assert_eq!(
            requirement_name("pytest[testing]==8"),
            Some("pytest".into())
        );
        assert_eq!(requirement_name("-r other.txt"), None);
        assert_eq!(requirement_name("./local"), None);
        assert_eq!(requirement_name("git+https://x/y.git"), None);
    }
}
