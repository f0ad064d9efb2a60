//! `build.env` and `build.path`: what an operator adds to the environment of a worktree's
//! preparation and of the Coder's runs — a module proxy (`GOPROXY`, `GONOSUMDB`,
//! `GOFLAGS`), a package index mirror (`PIP_INDEX_URL`), a toolchain's home (`RUSTUP_HOME`)
//! and the directories of toolchains outside the system's (`/root/.cargo/bin`).
//!
//! Both reach the sandbox, which holds no secret: a variable whose name says it holds one,
//! or an address with a password in it, is refused here with an error naming the field,
//! rather than handed to code a repository controls. `PATH` is built by the controller
//! (the virtual environment first, then `build.path`, then the system's), so it is refused
//! in `build.env` with a pointer to `build.path`.

use std::collections::BTreeMap;

/// Words in a variable's name that say it holds a secret.
const SECRET_WORDS: [&str; 7] = [
    "TOKEN",
    "SECRET",
    "PASSWORD",
    "PASSWD",
    "CREDENTIAL",
    "API_KEY",
    "PRIVATE_KEY",
];

/// Why a `build.env` entry or a `build.path` directory is refused (the message of the
/// field's error).
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum BuildEnvError {
    #[error(
        "`{0}` is not an environment variable name (letters, digits and `_`, not starting with a digit)"
    )]
    Name(String),
    #[error(
        "`PATH` is built by CodeButler; add directories to it with build.path (e.g. [\"/root/.cargo/bin\"])"
    )]
    Path,
    #[error("`{0}` looks like a secret, and build.env reaches the sandbox, which never holds one")]
    SecretName(String),
    #[error(
        "the value of `{0}` carries a password in an address (user:password@host); build.env reaches the sandbox, which never holds a secret"
    )]
    SecretValue(String),
    #[error("the value of `{0}` holds a NUL character")]
    Nul(String),
    #[error("`{0}` is not an absolute directory without `:`")]
    Directory(String),
    #[error(
        "the sandbox cannot see `{0}`: add it (or the toolchain it belongs to) to sandbox.readOnly"
    )]
    Hidden(String),
}

/// Checks `build.env`: names, no `PATH`, nothing that looks like a secret.
pub fn check_env(env: &BTreeMap<String, String>) -> Result<(), BuildEnvError> {
    for (name, value) in env {
        let valid = name
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
            && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
        if !valid {
            return Err(BuildEnvError::Name(name.clone()));
        }
        if name == "PATH" {
            return Err(BuildEnvError::Path);
        }
        let upper = name.to_ascii_uppercase();
        if SECRET_WORDS.iter().any(|w| upper.contains(w)) {
            return Err(BuildEnvError::SecretName(name.clone()));
        }
        if value.contains('\0') {
            return Err(BuildEnvError::Nul(name.clone()));
        }
        if has_userinfo_password(value) {
            return Err(BuildEnvError::SecretValue(name.clone()));
        }
    }
    Ok(())
}

/// Checks `build.path`: absolute directories that can stand in a `PATH`.
pub fn check_path(path: &[String]) -> Result<(), BuildEnvError> {
    match path
        .iter()
        .find(|dir| !dir.starts_with('/') || dir.contains(':') || dir.contains('\0'))
    {
        Some(dir) => Err(BuildEnvError::Directory(dir.clone())),
        None => Ok(()),
    }
}

/// The host's system directories the sandbox shows (read-only), as its mount plan binds
/// them.
const SYSTEM_DIRS: [&str; 7] = [
    "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32",
];

/// Checks that each `build.path` directory is one the sandbox shows: under a system
/// directory or a `sandbox.readOnly` path (`read_only`). A toolchain's directory the
/// sandbox cannot see would only fail later, in the worktree's preparation.
pub fn check_path_visible(path: &[String], read_only: &[String]) -> Result<(), BuildEnvError> {
    let under =
        |dir: &str, root: &str| std::path::Path::new(dir).starts_with(std::path::Path::new(root));
    match path.iter().find(|dir| {
        !SYSTEM_DIRS
            .iter()
            .copied()
            .chain(read_only.iter().map(String::as_str))
            .any(|root| under(dir, root))
    }) {
        Some(dir) => Err(BuildEnvError::Hidden(dir.clone())),
        None => Ok(()),
    }
}

/// Whether `value` holds an address with a password (`scheme://user:password@host`),
/// anywhere in a comma- or `|`-separated list (the shape of `GOPROXY`).
fn has_userinfo_password(value: &str) -> bool {
    value.split([',', '|', ' ']).any(|item| {
        let Some((_, rest)) = item.split_once("://") else {
            return false;
        };
        let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
        authority
            .rsplit_once('@')
            .is_some_and(|(userinfo, _)| userinfo.contains(':'))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn proxies_and_toolchain_homes_pass() {
        assert_eq!(
            check_env(&env(&[
                ("GOPROXY", "https://proxy.corp.example,direct"),
                ("GONOSUMDB", "corp.example/*"),
                ("GOFLAGS", "-mod=mod"),
                ("PIP_INDEX_URL", "https://pypi.corp.example/simple"),
                ("RUSTUP_HOME", "/root/.rustup"),
                ("npm_config_registry", "https://npm.corp.example/"),
                ("GOPROXY_USER_ONLY", "https://user@proxy.example"),
            ])),
            Ok(())
        );
        assert_eq!(check_path(&["/root/.cargo/bin".into()]), Ok(()));
    }

    #[test]
    fn secrets_path_and_bad_names_are_refused() {
        for (pairs, expected) in [
            (vec![("PATH", "/x")], BuildEnvError::Path),
            (
                vec![("NPM_TOKEN", "abc")],
                BuildEnvError::SecretName("NPM_TOKEN".into()),
            ),
            (
                vec![("openai_api_key", "abc")],
                BuildEnvError::SecretName("openai_api_key".into()),
            ),
            (
                vec![(
                    "GOPROXY",
                    "https://proxy.example,https://me:hunter2@corp.example/go",
                )],
                BuildEnvError::SecretValue("GOPROXY".into()),
            ),
            (vec![("1BAD", "x")], BuildEnvError::Name("1BAD".into())),
            (vec![("A-B", "x")], BuildEnvError::Name("A-B".into())),
        ] {
            assert_eq!(check_env(&env(&pairs)), Err(expected));
        }
        assert_eq!(
            check_path(&["relative/bin".into()]),
            Err(BuildEnvError::Directory("relative/bin".into()))
        );
        assert_eq!(
            check_path(&["/a:/b".into()]),
            Err(BuildEnvError::Directory("/a:/b".into()))
        );
    }

    #[test]
    fn path_directories_must_be_ones_the_sandbox_shows() {
        let read_only = ["/root/.rustup/toolchains/stable".to_owned()];
        assert_eq!(
            check_path_visible(
                &[
                    "/root/.rustup/toolchains/stable/bin".into(),
                    "/usr/lib/go-1.19/bin".into()
                ],
                &read_only
            ),
            Ok(())
        );
        assert_eq!(
            check_path_visible(&["/root/.cargo/bin".into()], &read_only),
            Err(BuildEnvError::Hidden("/root/.cargo/bin".into()))
        );
        // A prefix of a name is not a parent directory.
        assert_eq!(
            check_path_visible(
                &["/root/.rustup/toolchains/stable-2/bin".into()],
                &read_only
            ),
            Err(BuildEnvError::Hidden(
                "/root/.rustup/toolchains/stable-2/bin".into()
            ))
        );
    }
}
