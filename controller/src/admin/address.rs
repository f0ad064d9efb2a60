//! Which admin socket `runnerctl` talks to. Each repository a service serves keeps its own
//! admin socket (`<repo>/.codebutler/run/admin.sock`), so addressing a repository is finding
//! its working tree: `--repo` is a directory (inside the repository), or else the name of a
//! repository listed under `repositories` in the global config; without it, the repository
//! containing the current directory.

use std::path::{Path, PathBuf};

use crate::config::{self, ConfigError};
use crate::layout::Layout;

/// Why the admin socket could not be found.
#[derive(Debug, thiserror::Error)]
pub enum AddressError {
    #[error("read current directory: {0}")]
    CurrentDir(std::io::Error),
    #[error(
        "{} is not inside a git repository: run runnerctl in the repository or pass --repo or --socket",
        start.display()
    )]
    NotARepository { start: PathBuf, source: git2::Error },
    #[error("a bare repository has no CodeButler controller")]
    Bare,
    #[error("`{name}` is neither a directory nor a repository listed in {}{}", global.display(), listed(names))]
    Unknown {
        name: String,
        global: PathBuf,
        names: Vec<String>,
    },
    #[error("configuration: {0}")]
    Config(#[from] ConfigError),
}

fn listed(names: &[String]) -> String {
    if names.is_empty() {
        " (it lists none)".to_owned()
    } else {
        format!(" (it lists {})", names.join(", "))
    }
}

/// The admin socket of the repository `repo` names (a directory, else a listed name), or
/// of the one containing the current directory.
pub fn admin_socket(repo: Option<&str>) -> Result<PathBuf, AddressError> {
    let start = match repo {
        Some(dir) if Path::new(dir).is_dir() => PathBuf::from(dir),
        Some(name) => return listed_socket(name, &config::global_dir()?.join("config.json")),
        None => std::env::current_dir().map_err(AddressError::CurrentDir)?,
    };
    let repository = match git2::Repository::discover(&start) {
        Ok(repository) => repository,
        Err(source) => return Err(AddressError::NotARepository { start, source }),
    };
    let root = repository.workdir().ok_or(AddressError::Bare)?;
    Ok(socket_of(root))
}

/// The admin socket of the repository listed as `name` in the global config at `global`.
fn listed_socket(name: &str, global: &Path) -> Result<PathBuf, AddressError> {
    let entries = config::entries(global)?.unwrap_or_default();
    match entries.iter().find(|e| e.name == name) {
        Some(entry) => Ok(socket_of(&entry.path)),
        None => Err(AddressError::Unknown {
            name: name.to_owned(),
            global: global.to_owned(),
            names: entries.into_iter().map(|e| e.name).collect(),
        }),
    }
}

fn socket_of(root: &Path) -> PathBuf {
    Layout::new(root).admin_socket()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_name_is_looked_up_in_the_global_repositories() {
        let dir = tempfile::tempdir().unwrap();
        let api = dir.path().join("api");
        git2::Repository::init(&api).unwrap();
        let api = api.canonicalize().unwrap();
        let global = dir.path().join("config.json");
        std::fs::write(
            &global,
            serde_json::json!({"repositories": [{"name": "api", "path": api}]}).to_string(),
        )
        .unwrap();
        assert_eq!(
            listed_socket("api", &global).unwrap(),
            api.join(".codebutler/run/admin.sock")
        );
        assert_eq!(
            listed_socket("web", &global).unwrap_err().to_string(),
            format!(
                "`web` is neither a directory nor a repository listed in {} (it lists api)",
                global.display()
            )
        );
    }
}
