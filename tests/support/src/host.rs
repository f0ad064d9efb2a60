//! A host without a kernel feature the sandbox needs, as far as one process and its children
//! can tell — so a test can start the daemon where Landlock, user namespaces, seccomp,
//! cgroups or loop devices are missing, on a machine that has them all:
//!
//! - Landlock, user namespaces and seccomp: a seccomp filter, installed in the child before
//!   it execs, answers their system calls as a kernel without them does (`ENOSYS` for
//!   Landlock's and for `seccomp`, `EINVAL` for `prctl(PR_SET_SECCOMP)`, `EPERM` for an
//!   `unshare` of a user namespace, as where unprivileged ones are turned off);
//! - cgroups and loop devices: the command runs in a mount namespace of its own
//!   (`unshare --mount`) where `/sys/fs/cgroup` is an empty tmpfs, or where
//!   `/dev/loop-control` is `/dev/null`, as in a container that was given neither.
//!
//! Filters and namespaces are inherited, so the runner the daemon starts meets the same
//! host. Linux, x86_64 or aarch64; the namespaces need root.

#![allow(unsafe_code)]

use std::io;
use std::os::unix::process::CommandExt;
use std::process::Command;

use nix::libc;

/// A kernel feature to take away.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Missing {
    Landlock,
    UserNamespaces,
    Seccomp,
    Cgroups,
    LoopDevices,
}

/// `command` as it would run on a host without `feature` (see the module doc). The returned
/// command keeps `command`'s program, arguments, environment (it starts from an empty one,
/// as the daemon's commands in tests do) and directory; set its stdio afterwards.
pub fn without(feature: Missing, command: Command) -> Command {
    match feature {
        Missing::Landlock => filtered(
            command,
            vec![
                Rule::always(libc::SYS_landlock_create_ruleset, libc::ENOSYS),
                Rule::always(libc::SYS_landlock_add_rule, libc::ENOSYS),
                Rule::always(libc::SYS_landlock_restrict_self, libc::ENOSYS),
            ],
        ),
        Missing::UserNamespaces => filtered(
            command,
            vec![Rule::when_flags(
                libc::SYS_unshare,
                libc::CLONE_NEWUSER as u32,
                libc::EPERM,
            )],
        ),
        Missing::Seccomp => filtered(
            command,
            vec![
                Rule::always(libc::SYS_seccomp, libc::ENOSYS),
                Rule::when_equal(libc::SYS_prctl, libc::PR_SET_SECCOMP as u32, libc::EINVAL),
            ],
        ),
        Missing::Cgroups => in_mount_namespace(command, "mount -t tmpfs none /sys/fs/cgroup"),
        Missing::LoopDevices => {
            in_mount_namespace(command, "mount --bind /dev/null /dev/loop-control")
        }
    }
}

/// `command` run through `unshare --mount` and a shell that first runs `setup` (mounts that
/// only its own mount namespace sees).
fn in_mount_namespace(command: Command, setup: &str) -> Command {
    let mut wrapped = Command::new("unshare");
    wrapped
        .args(["--mount", "--propagation", "private", "--", "/bin/sh", "-c"])
        .arg(format!("{setup} && exec \"$0\" \"$@\""))
        .arg(command.get_program())
        .args(command.get_args());
    copy_context(&command, &mut wrapped);
    wrapped
}

/// Gives `to` the environment and directory `from` was given, from an empty environment.
fn copy_context(from: &Command, to: &mut Command) {
    to.env_clear();
    for (key, value) in from.get_envs() {
        if let Some(value) = value {
            to.env(key, value);
        }
    }
    if let Some(dir) = from.get_current_dir() {
        to.current_dir(dir);
    }
}

/// One system call the filter answers with an error.
#[derive(Clone, Copy, Debug)]
struct Rule {
    nr: libc::c_long,
    /// `Some((value, equal))`: only when its first argument equals `value` (`equal`) or has
    /// one of `value`'s bits set (`!equal`).
    arg0: Option<(u32, bool)>,
    errno: i32,
}

impl Rule {
    fn always(nr: libc::c_long, errno: i32) -> Self {
        Self {
            nr,
            arg0: None,
            errno,
        }
    }

    fn when_flags(nr: libc::c_long, flags: u32, errno: i32) -> Self {
        Self {
            nr,
            arg0: Some((flags, false)),
            errno,
        }
    }

    fn when_equal(nr: libc::c_long, value: u32, errno: i32) -> Self {
        Self {
            nr,
            arg0: Some((value, true)),
            errno,
        }
    }
}

#[cfg(target_arch = "x86_64")]
const AUDIT_ARCH: u32 = 0xc000_003e;
#[cfg(target_arch = "aarch64")]
const AUDIT_ARCH: u32 = 0xc000_00b7;

const BPF_LD_W_ABS: u16 = 0x20;
const BPF_JEQ_K: u16 = 0x15;
const BPF_JSET_K: u16 = 0x45;
const BPF_RET_K: u16 = 0x06;
const SECCOMP_RET_ALLOW: u32 = 0x7fff_0000;
const SECCOMP_RET_ERRNO: u32 = 0x0005_0000;
/// Offsets in `struct seccomp_data`: the call's number, the architecture, the first
/// argument's low 32 bits (little-endian).
const OFFSET_NR: u32 = 0;
const OFFSET_ARCH: u32 = 4;
const OFFSET_ARG0: u32 = 16;

fn op(code: u16, jt: u8, jf: u8, k: u32) -> libc::sock_filter {
    libc::sock_filter { code, jt, jf, k }
}

/// The filter: another architecture passes; each rule's call (with its argument) gets its
/// errno; everything else passes.
fn program(rules: &[Rule]) -> Vec<libc::sock_filter> {
    let mut program = vec![
        op(BPF_LD_W_ABS, 0, 0, OFFSET_ARCH),
        op(BPF_JEQ_K, 1, 0, AUDIT_ARCH),
        op(BPF_RET_K, 0, 0, SECCOMP_RET_ALLOW),
    ];
    for rule in rules {
        let refuse = op(
            BPF_RET_K,
            0,
            0,
            SECCOMP_RET_ERRNO | (rule.errno as u32 & 0xffff),
        );
        let nr = u32::try_from(rule.nr).expect("a system call number");
        program.push(op(BPF_LD_W_ABS, 0, 0, OFFSET_NR));
        match rule.arg0 {
            None => {
                program.push(op(BPF_JEQ_K, 0, 1, nr));
                program.push(refuse);
            }
            Some((value, equal)) => {
                program.push(op(BPF_JEQ_K, 0, 3, nr));
                program.push(op(BPF_LD_W_ABS, 0, 0, OFFSET_ARG0));
                let test = if equal { BPF_JEQ_K } else { BPF_JSET_K };
                program.push(op(test, 0, 1, value));
                program.push(refuse);
            }
        }
    }
    program.push(op(BPF_RET_K, 0, 0, SECCOMP_RET_ALLOW));
    program
}

/// `command` with the filter of `rules` installed in its process before it execs.
fn filtered(mut command: Command, rules: Vec<Rule>) -> Command {
    let program = program(&rules);
    let unprivileged = !nix::unistd::geteuid().is_root();
    // SAFETY: the closure runs in the forked child before exec and only makes system calls
    // (prctl, seccomp) on memory allocated before the fork (`program`) or on its own stack;
    // it allocates nothing and takes no lock.
    unsafe {
        command.pre_exec(move || {
            // Without CAP_SYS_ADMIN the kernel takes a filter only with no_new_privs.
            if unprivileged && libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 {
                return Err(io::Error::last_os_error());
            }
            let fprog = libc::sock_fprog {
                len: program.len() as u16,
                filter: program.as_ptr().cast_mut(),
            };
            let installed = libc::syscall(
                libc::SYS_seccomp,
                1, // SECCOMP_SET_MODE_FILTER
                0,
                &fprog as *const libc::sock_fprog,
            );
            if installed != 0 {
                return Err(io::Error::last_os_error());
            }
            Ok(())
        });
    }
    command
}
