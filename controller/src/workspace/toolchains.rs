//! The toolchains the sandbox is shown without a `sandbox.readOnly` written by hand: found at
//! start (and by `codebutler init`'s checks) in the service user's home and in the homes its
//! `PATH` names, by the files their installers leave there.
//!
//! - rustup: `$RUSTUP_HOME` or `<home>/.rustup` (with `settings.toml` or `toolchains/`),
//!   and the proxies in `$CARGO_HOME/bin` or `<home>/.cargo/bin` (`cargo`). Both are shown
//!   read-only, the proxies' directory on the `PATH`, and `RUSTUP_HOME` set so a proxy
//!   finds the toolchain `settings.toml` makes the default (or the project's
//!   `rust-toolchain.toml` names, when it is installed). `CARGO_HOME` is left to the
//!   worktree's own cache (`cargo fetch` fills it); only `bin/` of the host's cargo home is
//!   shown, never the rest of it (`credentials.toml` holds a registry token).
//! - pyenv: `$PYENV_ROOT` or `<home>/.pyenv`, the version `$PYENV_VERSION` or its `version`
//!   file selects (`versions/<v>/bin/python3`): that version's directory, its `bin` on the
//!   `PATH`, so the project's `.venv` is made from the Python the service user's shell runs.
//! - nvm: `$NVM_DIR` or `<home>/.nvm`, the newest `versions/node/<v>/bin/node`.
//! - fnm: `$FNM_DIR` or `<home>/.local/share/fnm`, the version its `aliases/default` link
//!   names (resolved, and checked to hold `bin/node`).
//! - volta: `$VOLTA_HOME` or `<home>/.volta` (`bin/volta`): its directory and `bin`.
//! - uv and pipx's applications: `<home>/.local/bin` (with `uv`, or with pipx's
//!   `<home>/.local/share/pipx/venvs`, which its links point into and which is shown too).
//! - Go: `$GOROOT` or `/usr/local/go` (the official archive's place) with `bin/go`.
//! - Java: `$JAVA_HOME` or SDKMAN's `$SDKMAN_DIR/candidates/java/current` (`<home>/.sdkman`
//!   by default) with `bin/java`: its directory, its `bin` on the `PATH`, `JAVA_HOME` set.
//! - Maven: `$MAVEN_HOME` or SDKMAN's `candidates/maven/current` with `bin/mvn`: its
//!   directory, its `bin` on the `PATH`, `MAVEN_HOME` set.
//!
//! Not looked for: Debian's Java and Maven (under `/usr`, which the sandbox shows), Maven's
//! `~/.m2` (it writes there, and `settings.xml` may hold credentials: a project's
//! dependencies are the preparation's), and Go's module cache (the preparation's
//! `go mod download` fills the worktree's own).
//!
//! The homes looked in are `HOME` and each home a `PATH` entry lies in the way these
//! installers put it (`<home>/.cargo/bin`, `<home>/.pyenv/shims`, `<home>/.local/bin`, ...):
//! a service whose `HOME` is its configuration directory still finds the toolchains its
//! `PATH` runs. All found are shown, whatever a repository's platforms: a Python package
//! may build a Rust extension, and what is shown is read-only and holds no secret.
//!
//! A directory that is a link is resolved once and its real path is what is mounted (a
//! link is not something the sandbox can show); a resolved path must still hold the
//! installer's files, and must not be `/`, a home looked in, or a directory holding one (a
//! link `~/.pyenv/versions/x -> ~` would otherwise show the home's secrets).
//!
//! [`find`] is pure apart from reading the file system it is pointed at (tests give it fake
//! homes); [`Toolchains::of_this_process`] reads this process's environment.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// What the finder reads of the service user's environment.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct HostEnv {
    /// `HOME`.
    pub home: Option<PathBuf>,
    /// `PATH`'s directories, in order.
    pub path: Vec<PathBuf>,
    /// The installers' own variables that are set (`RUSTUP_HOME`, `CARGO_HOME`,
    /// `PYENV_ROOT`, `PYENV_VERSION`, `NVM_DIR`, `FNM_DIR`, `VOLTA_HOME`, `GOROOT`,
    /// `JAVA_HOME`, `MAVEN_HOME`, `SDKMAN_DIR`).
    pub vars: BTreeMap<String, String>,
}

/// The installers' variables [`HostEnv::vars`] holds when they are set.
pub const INSTALLER_VARS: [&str; 11] = [
    "RUSTUP_HOME",
    "CARGO_HOME",
    "PYENV_ROOT",
    "PYENV_VERSION",
    "NVM_DIR",
    "FNM_DIR",
    "VOLTA_HOME",
    "GOROOT",
    "JAVA_HOME",
    "MAVEN_HOME",
    "SDKMAN_DIR",
];

impl HostEnv {
    /// This process's `HOME`, `PATH` and installers' variables.
    pub fn of_this_process() -> Self {
        Self {
            home: std::env::var_os("HOME").map(PathBuf::from),
            path: std::env::var_os("PATH")
                .map(|p| std::env::split_paths(&p).collect())
                .unwrap_or_default(),
            vars: INSTALLER_VARS
                .iter()
                .filter_map(|name| Some(((*name).to_owned(), std::env::var(name).ok()?)))
                .collect(),
        }
    }
}

/// One toolchain found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Toolchain {
    /// What it is, as `--status` says it ("rustup", "pyenv 3.11.7", ...).
    pub name: String,
    /// Host directories the sandbox shows read-only, at the same paths.
    pub read_only: Vec<PathBuf>,
    /// Directories for the sandbox's `PATH`, in this order.
    pub path: Vec<PathBuf>,
    /// Variables every sandboxed process gets.
    pub env: BTreeMap<String, String>,
}

/// The toolchains found, in a fixed order (rustup, pyenv, nvm, fnm, volta, uv and pipx,
/// Go, Java, Maven).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Toolchains {
    pub found: Vec<Toolchain>,
}

impl Toolchains {
    /// None: `sandbox.findToolchains` is off.
    pub fn none() -> Self {
        Self::default()
    }

    /// What this process's environment finds when `enabled` (`sandbox.findToolchains`).
    pub fn of_this_process(enabled: bool) -> Self {
        if enabled {
            find(&HostEnv::of_this_process())
        } else {
            Self::none()
        }
    }

    /// Every directory to show read-only, without repeats.
    pub fn read_only(&self) -> Vec<PathBuf> {
        let mut out: Vec<PathBuf> = Vec::new();
        for dir in self.found.iter().flat_map(|t| &t.read_only) {
            if !out.contains(dir) {
                out.push(dir.clone());
            }
        }
        out
    }

    /// The `PATH` directories, as strings, without repeats.
    pub fn path(&self) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        for dir in self.found.iter().flat_map(|t| &t.path) {
            let dir = dir.to_string_lossy().into_owned();
            if !out.contains(&dir) {
                out.push(dir);
            }
        }
        out
    }

    /// The variables, the first toolchain's value winning.
    pub fn env(&self) -> BTreeMap<String, String> {
        let mut out = BTreeMap::new();
        for (name, value) in self.found.iter().flat_map(|t| &t.env) {
            out.entry(name.clone()).or_insert_with(|| value.clone());
        }
        out
    }

    /// One line per toolchain: its name and what the sandbox shows of it.
    pub fn lines(&self) -> Vec<String> {
        self.found
            .iter()
            .map(|t| {
                let dirs: Vec<String> = t
                    .read_only
                    .iter()
                    .map(|d| d.display().to_string())
                    .collect();
                format!("{} ({})", t.name, dirs.join(", "))
            })
            .collect()
    }
}

/// The toolchains `env` finds (see the module doc).
pub fn find(env: &HostEnv) -> Toolchains {
    let homes = homes(env);
    let finder = Finder { homes: &homes };
    let var = |name: &str| env.vars.get(name).map(PathBuf::from);
    let found = [
        finder.rustup(var("RUSTUP_HOME"), var("CARGO_HOME")),
        finder.pyenv(
            var("PYENV_ROOT"),
            env.vars.get("PYENV_VERSION").map(String::as_str),
        ),
        finder.nvm(var("NVM_DIR")),
        finder.fnm(var("FNM_DIR")),
        finder.volta(var("VOLTA_HOME")),
        finder.local_bin(),
        finder.go(var("GOROOT")),
        finder.sdk(var("JAVA_HOME"), var("SDKMAN_DIR"), JAVA),
        finder.sdk(var("MAVEN_HOME"), var("SDKMAN_DIR"), MAVEN),
    ];
    Toolchains {
        found: found.into_iter().flatten().collect(),
    }
}

/// `HOME`, then the homes `PATH`'s entries lie in as the installers lay them out.
fn homes(env: &HostEnv) -> Vec<PathBuf> {
    const INSTALLER_BINS: [&str; 6] = [
        ".cargo/bin",
        ".pyenv/shims",
        ".pyenv/bin",
        ".local/bin",
        ".volta/bin",
        ".nvm",
    ];
    let mut out: Vec<PathBuf> = env.home.iter().cloned().collect();
    for dir in &env.path {
        for bin in INSTALLER_BINS {
            let home = if bin == ".nvm" {
                // nvm puts `<home>/.nvm/versions/node/<v>/bin` on the PATH.
                dir.ancestors()
                    .find(|a| a.file_name().is_some_and(|n| n == ".nvm"))
                    .and_then(Path::parent)
            } else {
                strip_tail(dir, bin)
            };
            if let Some(home) = home
                && home.is_absolute()
                && !out.iter().any(|h| h == home)
            {
                out.push(home.to_owned());
            }
        }
    }
    out
}

/// `dir` without the trailing components `tail`, when it ends with them.
fn strip_tail<'a>(dir: &'a Path, tail: &str) -> Option<&'a Path> {
    let mut rest = dir;
    for part in tail.rsplit('/') {
        if rest.file_name()? != part {
            return None;
        }
        rest = rest.parent()?;
    }
    Some(rest)
}

struct Finder<'a> {
    homes: &'a [PathBuf],
}

/// A toolchain SDKMAN installs, or its home variable names.
struct Sdk {
    /// As `--status` names it.
    name: &'static str,
    /// SDKMAN's candidate.
    candidate: &'static str,
    /// The executable its `bin` holds.
    marker: &'static str,
    /// The variable that names its directory, set in the sandbox too.
    var: &'static str,
}

const JAVA: Sdk = Sdk {
    name: "java",
    candidate: "java",
    marker: "bin/java",
    var: "JAVA_HOME",
};

const MAVEN: Sdk = Sdk {
    name: "maven",
    candidate: "maven",
    marker: "bin/mvn",
    var: "MAVEN_HOME",
};

impl Finder<'_> {
    /// `dir` resolved, when the real directory holds `marker` (a relative path) and is
    /// neither `/` nor a home nor holds one.
    fn checked(&self, dir: &Path, marker: &str) -> Option<PathBuf> {
        let real = std::fs::canonicalize(dir).ok()?;
        if !real.is_dir() || real.parent().is_none() {
            return None;
        }
        let covers_a_home = self.homes.iter().any(|home| {
            let home = std::fs::canonicalize(home).unwrap_or_else(|_| home.clone());
            home.starts_with(&real)
        });
        if covers_a_home {
            tracing::warn!(
                "{} resolves to {}, which holds a home directory: not shown to the sandbox",
                dir.display(),
                real.display()
            );
            return None;
        }
        (marker.is_empty() || real.join(marker).exists()).then_some(real)
    }

    /// The first of `explicit`, then `<home>/<rel>` for each home, that [`Self::checked`]
    /// accepts with `marker`.
    fn first(&self, explicit: Option<PathBuf>, rel: &str, marker: &str) -> Option<PathBuf> {
        match explicit {
            Some(dir) => self.checked(&dir, marker),
            None => self
                .homes
                .iter()
                .find_map(|home| self.checked(&home.join(rel), marker)),
        }
    }

    fn rustup(
        &self,
        rustup_home: Option<PathBuf>,
        cargo_home: Option<PathBuf>,
    ) -> Option<Toolchain> {
        let bin = self.first(cargo_home.map(|c| c.join("bin")), ".cargo/bin", "cargo")?;
        let explicit = rustup_home.is_some();
        let home = match self.first(rustup_home.clone(), ".rustup", "settings.toml") {
            Some(home) => home,
            None if explicit => return None,
            None => self.first(None, ".rustup", "toolchains")?,
        };
        Some(Toolchain {
            name: "rustup".to_owned(),
            read_only: vec![home.clone(), bin.clone()],
            path: vec![bin],
            env: BTreeMap::from([(
                "RUSTUP_HOME".to_owned(),
                home.to_string_lossy().into_owned(),
            )]),
        })
    }

    fn pyenv(&self, root: Option<PathBuf>, version: Option<&str>) -> Option<Toolchain> {
        let root = self.first(root, ".pyenv", "versions")?;
        let selected = match version {
            Some(v) => v.to_owned(),
            None => std::fs::read_to_string(root.join("version")).ok()?,
        };
        // The first version named (pyenv allows several, the first one's `python3` wins).
        let selected = selected
            .split(|c: char| c.is_whitespace() || c == ':')
            .find(|v| !v.is_empty() && !v.starts_with('#'))?;
        if selected == "system" || selected.contains('/') || selected.starts_with('.') {
            return None;
        }
        let dir = self.checked(&root.join("versions").join(selected), "bin/python3")?;
        Some(Toolchain {
            name: format!("pyenv {selected}"),
            read_only: vec![dir.clone()],
            path: vec![dir.join("bin")],
            env: BTreeMap::new(),
        })
    }

    fn nvm(&self, nvm_dir: Option<PathBuf>) -> Option<Toolchain> {
        let nvm = self.first(nvm_dir, ".nvm", "versions/node")?;
        let versions = std::fs::read_dir(nvm.join("versions/node")).ok()?;
        let mut names: Vec<String> = versions
            .filter_map(Result::ok)
            .filter_map(|e| e.file_name().into_string().ok())
            .filter(|n| n.starts_with('v'))
            .collect();
        names.sort_by_key(|n| version_key(n));
        let newest = names.pop()?;
        let dir = self.checked(&nvm.join("versions/node").join(&newest), "bin/node")?;
        Some(Toolchain {
            name: format!("nvm node {newest}"),
            read_only: vec![dir.clone()],
            path: vec![dir.join("bin")],
            env: BTreeMap::new(),
        })
    }

    fn volta(&self, volta_home: Option<PathBuf>) -> Option<Toolchain> {
        let home = self.first(volta_home, ".volta", "bin/volta")?;
        Some(Toolchain {
            name: "volta".to_owned(),
            read_only: vec![home.clone()],
            path: vec![home.join("bin")],
            env: BTreeMap::from([("VOLTA_HOME".to_owned(), home.to_string_lossy().into_owned())]),
        })
    }

    fn fnm(&self, fnm_dir: Option<PathBuf>) -> Option<Toolchain> {
        let fnm = self.first(fnm_dir, ".local/share/fnm", "aliases/default")?;
        let dir = self.checked(&fnm.join("aliases/default"), "bin/node")?;
        Some(Toolchain {
            name: "fnm node".to_owned(),
            read_only: vec![dir.clone()],
            path: vec![dir.join("bin")],
            env: BTreeMap::new(),
        })
    }

    /// `<home>/.local/bin` when uv or pipx put something there.
    fn local_bin(&self) -> Option<Toolchain> {
        self.homes.iter().find_map(|home| {
            let uv = self.checked(&home.join(".local/bin"), "uv");
            let pipx = self.checked(&home.join(".local/share/pipx"), "venvs");
            let bin = match (&uv, &pipx) {
                (Some(bin), _) => bin.clone(),
                (None, Some(_)) => self.checked(&home.join(".local/bin"), "")?,
                (None, None) => return None,
            };
            let mut names = Vec::new();
            let mut read_only = vec![bin.clone()];
            if uv.is_some() {
                names.push("uv");
            }
            if let Some(pipx) = pipx {
                names.push("pipx");
                read_only.push(pipx);
            }
            Some(Toolchain {
                name: names.join(" and "),
                read_only,
                path: vec![bin],
                env: BTreeMap::new(),
            })
        })
    }

    fn go(&self, goroot: Option<PathBuf>) -> Option<Toolchain> {
        let root = goroot.unwrap_or_else(|| PathBuf::from("/usr/local/go"));
        let root = self.checked(&root, "bin/go")?;
        Some(Toolchain {
            name: "go".to_owned(),
            read_only: vec![root.clone()],
            path: vec![root.join("bin")],
            env: BTreeMap::new(),
        })
    }
}

impl Finder<'_> {
    /// `sdk` from its variable's directory, else SDKMAN's current candidate
    /// (`$SDKMAN_DIR` or `<home>/.sdkman`).
    fn sdk(
        &self,
        explicit: Option<PathBuf>,
        sdkman: Option<PathBuf>,
        sdk: Sdk,
    ) -> Option<Toolchain> {
        let current = format!("candidates/{}/current", sdk.candidate);
        let dir = match (explicit, sdkman) {
            (Some(dir), _) => self.checked(&dir, sdk.marker)?,
            (None, Some(sdkman)) => self.checked(&sdkman.join(&current), sdk.marker)?,
            (None, None) => self.first(None, &format!(".sdkman/{current}"), sdk.marker)?,
        };
        Some(Toolchain {
            name: sdk.name.to_owned(),
            read_only: vec![dir.clone()],
            path: vec![dir.join("bin")],
            env: BTreeMap::from([(sdk.var.to_owned(), dir.to_string_lossy().into_owned())]),
        })
    }
}

/// `v20.11.1` as numbers, for ordering versions.
fn version_key(name: &str) -> Vec<u64> {
    name.trim_start_matches('v')
        .split('.')
        .map(|p| p.parse().unwrap_or(0))
        .collect()
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::symlink;

    use super::*;

    fn touch(path: &Path) {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, "").unwrap();
    }

    /// A home laid out as rustup's and pyenv's installers lay it out.
    fn installed_home() -> tempfile::TempDir {
        let home = tempfile::tempdir().unwrap();
        let h = home.path();
        touch(&h.join(".cargo/bin/rustup"));
        symlink("rustup", h.join(".cargo/bin/cargo")).unwrap();
        touch(&h.join(".cargo/credentials.toml"));
        touch(&h.join(".rustup/settings.toml"));
        std::fs::create_dir_all(h.join(".rustup/toolchains/stable-x86_64-unknown-linux-gnu"))
            .unwrap();
        touch(&h.join(".pyenv/versions/3.11.7/bin/python3"));
        touch(&h.join(".pyenv/versions/3.12.1/bin/python3"));
        std::fs::write(h.join(".pyenv/version"), "3.11.7\n").unwrap();
        home
    }

    fn env_of(home: Option<&Path>, path: &[PathBuf]) -> HostEnv {
        HostEnv {
            home: home.map(Path::to_owned),
            path: path.to_vec(),
            vars: BTreeMap::new(),
        }
    }

    fn real(p: &Path) -> PathBuf {
        std::fs::canonicalize(p).unwrap()
    }

    #[test]
    fn rustup_and_pyenv_are_found_where_their_installers_put_them() {
        let home = installed_home();
        let h = real(home.path());
        let found = find(&env_of(Some(home.path()), &[]));
        assert_eq!(
            found.found,
            vec![
                Toolchain {
                    name: "rustup".into(),
                    read_only: vec![h.join(".rustup"), h.join(".cargo/bin")],
                    path: vec![h.join(".cargo/bin")],
                    env: BTreeMap::from([(
                        "RUSTUP_HOME".into(),
                        h.join(".rustup").display().to_string()
                    )]),
                },
                Toolchain {
                    name: "pyenv 3.11.7".into(),
                    read_only: vec![h.join(".pyenv/versions/3.11.7")],
                    path: vec![h.join(".pyenv/versions/3.11.7/bin")],
                    env: BTreeMap::new(),
                },
            ]
        );
        // The cargo home's token is never shown: only its bin.
        assert!(!found.read_only().contains(&h.join(".cargo")));
        assert_eq!(
            found.path(),
            vec![
                h.join(".cargo/bin").display().to_string(),
                h.join(".pyenv/versions/3.11.7/bin").display().to_string()
            ]
        );
    }

    #[test]
    fn homes_are_found_from_the_path_when_home_is_elsewhere() {
        let home = installed_home();
        let config_dir = tempfile::tempdir().unwrap();
        let path = vec![
            home.path().join(".cargo/bin"),
            home.path().join(".pyenv/shims"),
            PathBuf::from("/usr/bin"),
        ];
        let found = find(&env_of(Some(config_dir.path()), &path));
        let names: Vec<&str> = found.found.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names, ["rustup", "pyenv 3.11.7"]);
        // Nothing without a home or a PATH that leads to one.
        assert!(find(&env_of(Some(config_dir.path()), &[])).found.is_empty());
        assert!(find(&env_of(None, &[])).found.is_empty());
    }

    #[test]
    fn the_installers_variables_choose_the_directories() {
        let home = installed_home();
        let elsewhere = tempfile::tempdir().unwrap();
        let e = elsewhere.path();
        touch(&e.join("rustup/settings.toml"));
        touch(&e.join("py/versions/3.13.0/bin/python3"));
        let mut env = env_of(Some(home.path()), &[]);
        env.vars
            .insert("RUSTUP_HOME".into(), e.join("rustup").display().to_string());
        env.vars
            .insert("PYENV_ROOT".into(), e.join("py").display().to_string());
        env.vars.insert("PYENV_VERSION".into(), "3.13.0".into());
        let found = find(&env);
        assert_eq!(found.found[0].read_only[0], real(&e.join("rustup")));
        assert_eq!(found.found[1].name, "pyenv 3.13.0");
        assert_eq!(
            found.found[1].read_only,
            [real(&e.join("py/versions/3.13.0"))]
        );
        // pyenv's "system" is the system's Python: nothing to show.
        env.vars.insert("PYENV_VERSION".into(), "system".into());
        assert_eq!(find(&env).found.len(), 1);
    }

    #[test]
    fn a_linked_toolchain_is_mounted_at_its_real_path_and_a_hostile_link_is_refused() {
        let home = tempfile::tempdir().unwrap();
        let h = home.path();
        let opt = tempfile::tempdir().unwrap();
        touch(&opt.path().join("py311/bin/python3"));
        touch(&h.join(".pyenv/version"));
        std::fs::create_dir_all(h.join(".pyenv/versions")).unwrap();
        symlink(opt.path().join("py311"), h.join(".pyenv/versions/3.11")).unwrap();
        std::fs::write(h.join(".pyenv/version"), "3.11\n").unwrap();
        let found = find(&env_of(Some(h), &[]));
        let py = real(&opt.path().join("py311"));
        assert_eq!(found.read_only(), std::slice::from_ref(&py));
        assert_eq!(found.path(), [py.join("bin").display().to_string()]);

        // A version that is a link to the home itself (its bin/python3 planted) or to `/`
        // would show the home's secrets: refused.
        touch(&h.join("bin/python3"));
        std::fs::write(h.join(".ssh-key"), "secret").unwrap();
        symlink(h, h.join(".pyenv/versions/evil")).unwrap();
        std::fs::write(h.join(".pyenv/version"), "evil\n").unwrap();
        assert!(find(&env_of(Some(h), &[])).found.is_empty());
        symlink("/", h.join(".pyenv/versions/root")).unwrap();
        std::fs::write(h.join(".pyenv/version"), "root\n").unwrap();
        assert!(find(&env_of(Some(h), &[])).found.is_empty());
        // A link to somewhere that is not a Python install is not one.
        let empty = tempfile::tempdir().unwrap();
        symlink(empty.path(), h.join(".pyenv/versions/odd")).unwrap();
        std::fs::write(h.join(".pyenv/version"), "odd\n").unwrap();
        assert!(find(&env_of(Some(h), &[])).found.is_empty());
        // A cargo bin linked to the home is refused too.
        std::fs::create_dir_all(h.join(".cargo")).unwrap();
        touch(&h.join("cargo"));
        touch(&h.join(".rustup/settings.toml"));
        symlink(h, h.join(".cargo/bin")).unwrap();
        assert!(find(&env_of(Some(h), &[])).found.is_empty());
    }

    #[test]
    fn fnm_pipx_and_go_are_found_too() {
        let home = tempfile::tempdir().unwrap();
        let h = home.path();
        touch(&h.join(".local/share/fnm/node-versions/v22.1.0/installation/bin/node"));
        std::fs::create_dir_all(h.join(".local/share/fnm/aliases")).unwrap();
        symlink(
            h.join(".local/share/fnm/node-versions/v22.1.0/installation"),
            h.join(".local/share/fnm/aliases/default"),
        )
        .unwrap();
        std::fs::create_dir_all(h.join(".local/share/pipx/venvs/black/bin")).unwrap();
        std::fs::create_dir_all(h.join(".local/bin")).unwrap();
        let go = tempfile::tempdir().unwrap();
        touch(&go.path().join("bin/go"));
        let mut env = env_of(Some(h), &[]);
        env.vars
            .insert("GOROOT".into(), go.path().display().to_string());
        let found = find(&env);
        let h = real(h);
        let names: Vec<&str> = found.found.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names, ["fnm node", "pipx", "go"]);
        let node = h.join(".local/share/fnm/node-versions/v22.1.0/installation");
        assert_eq!(
            found.read_only(),
            [
                node.clone(),
                h.join(".local/bin"),
                h.join(".local/share/pipx"),
                real(go.path())
            ]
        );
        assert_eq!(
            found.path(),
            [
                node.join("bin"),
                h.join(".local/bin"),
                real(go.path()).join("bin")
            ]
            .map(|p| p.display().to_string())
        );
        // fnm's default linked to the home is refused.
        std::fs::remove_file(h.join(".local/share/fnm/aliases/default")).unwrap();
        touch(&h.join("bin/node"));
        symlink(&h, h.join(".local/share/fnm/aliases/default")).unwrap();
        env.vars.remove("GOROOT");
        let names: Vec<String> = find(&env).found.into_iter().map(|t| t.name).collect();
        assert!(!names.contains(&"fnm node".to_owned()), "{names:?}");
    }

    #[test]
    fn nvm_volta_and_uv_are_found_too() {
        let home = tempfile::tempdir().unwrap();
        let h = home.path();
        touch(&h.join(".nvm/versions/node/v18.19.0/bin/node"));
        touch(&h.join(".nvm/versions/node/v20.11.1/bin/node"));
        touch(&h.join(".nvm/versions/node/v9.0.0/bin/node"));
        touch(&h.join(".volta/bin/volta"));
        touch(&h.join(".local/bin/uv"));
        let found = find(&env_of(Some(h), &[]));
        let h = real(h);
        let names: Vec<&str> = found.found.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names, ["nvm node v20.11.1", "volta", "uv"]);
        assert_eq!(
            found.path(),
            [
                h.join(".nvm/versions/node/v20.11.1/bin"),
                h.join(".volta/bin"),
                h.join(".local/bin")
            ]
            .map(|p| p.display().to_string())
        );
        assert_eq!(
            found.env()["VOLTA_HOME"],
            h.join(".volta").display().to_string()
        );
        assert_eq!(
            found.lines()[2],
            format!("uv ({})", h.join(".local/bin").display())
        );
    }

    #[test]
    fn java_and_maven_are_found_from_sdkman_or_their_variables() {
        let home = tempfile::tempdir().unwrap();
        let h = home.path();
        // SDKMAN: `current` links to the installed version.
        touch(&h.join(".sdkman/candidates/java/21.0.2-tem/bin/java"));
        symlink(
            h.join(".sdkman/candidates/java/21.0.2-tem"),
            h.join(".sdkman/candidates/java/current"),
        )
        .unwrap();
        touch(&h.join(".sdkman/candidates/maven/3.9.6/bin/mvn"));
        symlink(
            h.join(".sdkman/candidates/maven/3.9.6"),
            h.join(".sdkman/candidates/maven/current"),
        )
        .unwrap();
        let found = find(&env_of(Some(h), &[]));
        let h = real(h);
        let java = h.join(".sdkman/candidates/java/21.0.2-tem");
        let maven = h.join(".sdkman/candidates/maven/3.9.6");
        let names: Vec<&str> = found.found.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names, ["java", "maven"]);
        assert_eq!(found.read_only(), [java.clone(), maven.clone()]);
        assert_eq!(
            found.path(),
            [java.join("bin"), maven.join("bin")].map(|p| p.display().to_string())
        );
        assert_eq!(found.env()["JAVA_HOME"], java.display().to_string());
        assert_eq!(found.env()["MAVEN_HOME"], maven.display().to_string());

        // `JAVA_HOME` wins over SDKMAN; one without `bin/java`, or that is the home, is refused.
        let jdk = tempfile::tempdir().unwrap();
        touch(&jdk.path().join("bin/java"));
        let mut env = env_of(Some(&h), &[]);
        env.vars
            .insert("JAVA_HOME".into(), jdk.path().display().to_string());
        assert_eq!(
            find(&env).env()["JAVA_HOME"],
            real(jdk.path()).display().to_string()
        );
        env.vars
            .insert("JAVA_HOME".into(), h.join("nowhere").display().to_string());
        let names: Vec<String> = find(&env).found.into_iter().map(|t| t.name).collect();
        assert_eq!(names, ["maven"]);
        touch(&h.join("bin/java"));
        env.vars.insert("JAVA_HOME".into(), h.display().to_string());
        let names: Vec<String> = find(&env).found.into_iter().map(|t| t.name).collect();
        assert_eq!(names, ["maven"]);
    }
}
