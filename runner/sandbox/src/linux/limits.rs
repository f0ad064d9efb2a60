//! Step 6: resource limits (rlimits; always applied, cgroups or not).

use nix::sys::resource::{Resource, getrlimit, setrlimit};
use serde::Serialize;

use super::error::{AtStep, SandboxError, Step};
use crate::spec::Limits;

/// Open files per process.
pub const MAX_OPEN_FILES: u64 = 4096;

/// One rlimit to set: soft = hard = `value`, lowered to the current hard limit if that is
/// lower (raising it would need a capability in the host's user namespace).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Rlimit {
    /// The resource, by its C name.
    pub name: &'static str,
    /// The requested value.
    pub value: u64,
    #[serde(skip)]
    resource: Resource,
}

/// The rlimits of `limits`, in the order they are set.
///
/// Note: `RLIMIT_NPROC` counts the processes of the sandbox's uid in its user namespace,
/// but the kernel exempts the host's uid 0 from it — when the runner runs as root, only the
/// pids cgroup bounds the number of processes.
pub fn rlimits(limits: &Limits) -> Vec<Rlimit> {
    let r = |name, resource, value| Rlimit {
        name,
        value,
        resource,
    };
    vec![
        r("RLIMIT_NPROC", Resource::RLIMIT_NPROC, limits.max_processes),
        r("RLIMIT_AS", Resource::RLIMIT_AS, limits.memory_bytes),
        r(
            "RLIMIT_FSIZE",
            Resource::RLIMIT_FSIZE,
            limits.file_size_bytes,
        ),
        r("RLIMIT_CPU", Resource::RLIMIT_CPU, limits.cpu_seconds),
        r("RLIMIT_CORE", Resource::RLIMIT_CORE, 0),
        r("RLIMIT_NOFILE", Resource::RLIMIT_NOFILE, MAX_OPEN_FILES),
    ]
}

/// Sets each rlimit.
pub(crate) fn apply(rlimits: &[Rlimit]) -> Result<(), SandboxError> {
    for l in rlimits {
        let (_, hard) =
            getrlimit(l.resource).at(Step::SetRlimit, || format!("getrlimit {}", l.name))?;
        let value = l.value.min(hard);
        setrlimit(l.resource, value, value).at(Step::SetRlimit, || {
            format!("setrlimit {} = {value}", l.name)
        })?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rlimits_follow_the_spec() {
        let got: Vec<(&str, u64)> = rlimits(&Limits::default())
            .iter()
            .map(|l| (l.name, l.value))
            .collect();
        assert_eq!(
            got,
            vec![
                ("RLIMIT_NPROC", 256),
                ("RLIMIT_AS", 2 << 30),
                ("RLIMIT_FSIZE", 1 << 30),
                ("RLIMIT_CPU", 3600),
                ("RLIMIT_CORE", 0),
                ("RLIMIT_NOFILE", 4096),
            ]
        );
    }
}
