//! Node's WebAssembly under the sandbox's address-space limit.
//!
//! The sandbox caps each process's address space (`RLIMIT_AS`, `sandbox.memoryMB`). Node
//! reserves about 10 GiB of address space for every WebAssembly memory, so that its bounds
//! checks can be left to the MMU, and under a cap of a few GiB every `WebAssembly.Memory`
//! fails with "Out of memory: Cannot allocate Wasm memory". Tools a project's tests need use
//! WebAssembly: yarn 2+ reads its cache's zip files with it, and test runners parse modules
//! with it (vitest through `es-module-lexer`). Node's `--disable-wasm-trap-handler` makes it
//! check bounds in code instead, without the reservation; it came in Node 20.15 and 22.2,
//! and an older Node refuses to start with an option it does not know in `NODE_OPTIONS`, so
//! it is given only to a Node that has it.
//!
//! [`options_for`] is the pure decision, tested by a table; [`node_version`] asks the
//! `node` the sandbox would run (the operator's, from `build.path` or the system's
//! directories; never a program from a repository).

use std::path::Path;
use std::process::{Command, Stdio};

use codebutler_sandbox::spec::PATH_INSIDE;

/// The option that lets Node's WebAssembly run under an address-space limit.
pub const DISABLE_WASM_TRAP_HANDLER: &str = "--disable-wasm-trap-handler";

/// A Node release, as `node --version` prints it (`v20.20.2`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct NodeVersion {
    pub major: u32,
    pub minor: u32,
}

impl NodeVersion {
    /// Parses `node --version`'s output (`v20.20.2`, a line end after it); `None` for
    /// anything else.
    pub fn parse(text: &str) -> Option<Self> {
        let mut parts = text.trim().strip_prefix('v')?.split('.');
        let major = parts.next()?.parse().ok()?;
        let minor = parts.next()?.parse().ok()?;
        Some(Self { major, minor })
    }
}

/// The `NODE_OPTIONS` a sandboxed Node of `version` needs for WebAssembly: the option where
/// that release has it (20.15 and later 20s, 22.2 and later), else none.
pub fn options_for(version: NodeVersion) -> Option<&'static str> {
    let has_it = match version.major {
        20 => version.minor >= 15,
        22 => version.minor >= 2,
        major => major > 22,
    };
    has_it.then_some(DISABLE_WASM_TRAP_HANDLER)
}

/// The version of the `node` the sandbox's `PATH` finds: `build.path`'s directories
/// (`extra`), then the system's; `None` when there is none or it does not answer.
pub fn node_version(extra: &[String]) -> Option<NodeVersion> {
    let node = extra
        .iter()
        .map(String::as_str)
        .chain(PATH_INSIDE.split(':'))
        .map(|dir| Path::new(dir).join("node"))
        .find(|path| path.is_file())?;
    // Nothing of a repository around it: an empty environment, the root as its directory.
    let output = Command::new(&node)
        .arg("--version")
        .env_clear()
        .current_dir("/")
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output();
    match output {
        Ok(out) if out.status.success() => {
            NodeVersion::parse(&String::from_utf8_lossy(&out.stdout))
        }
        Ok(out) => {
            tracing::warn!("{} --version: {}", node.display(), out.status);
            None
        }
        Err(e) => {
            tracing::warn!("{} --version: {e}", node.display());
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_are_read_as_node_prints_them() {
        let v = |major, minor| Some(NodeVersion { major, minor });
        assert_eq!(NodeVersion::parse("v20.20.2\n"), v(20, 20));
        assert_eq!(NodeVersion::parse("v18.19.0"), v(18, 19));
        assert_eq!(NodeVersion::parse("20.1.0"), None);
        assert_eq!(NodeVersion::parse("vx.y"), None);
        assert_eq!(NodeVersion::parse(""), None);
    }

    #[test]
    fn only_a_node_that_has_the_option_gets_it() {
        let table = [
            (18, 19, false),
            (20, 14, false),
            (20, 15, true),
            (20, 20, true),
            (21, 7, false),
            (22, 1, false),
            (22, 2, true),
            (23, 0, true),
            (24, 11, true),
        ];
        for (major, minor, has_it) in table {
            assert_eq!(
                options_for(NodeVersion { major, minor }).is_some(),
                has_it,
                "{major}.{minor}"
            );
        }
    }

    #[test]
    fn the_node_the_sandbox_would_run_is_asked() {
        use std::os::unix::fs::PermissionsExt;
        // build.path's directories come first; one without a node is passed over.
        let empty = tempfile::tempdir().unwrap();
        let toolchain = tempfile::tempdir().unwrap();
        let node = toolchain.path().join("node");
        std::fs::write(&node, "#!/bin/sh\necho v22.3.1\n").unwrap();
        std::fs::set_permissions(&node, std::fs::Permissions::from_mode(0o755)).unwrap();
        let extra = [
            empty.path().display().to_string(),
            toolchain.path().display().to_string(),
        ];
        assert_eq!(
            node_version(&extra),
            Some(NodeVersion {
                major: 22,
                minor: 3
            })
        );
        // A node that does not answer with a version gets no option.
        std::fs::write(&node, "#!/bin/sh\nexit 3\n").unwrap();
        assert_eq!(node_version(&extra[1..]), None);
    }
}
