//! Steps 9 and 10: the seccomp filters, as a plain rule list ([`rules`]) compiled with seccompiler.
//!
//! The default is to allow: the sandbox's filesystem, network and process isolation come
//! from namespaces, mounts, Landlock and dropped capabilities; seccomp takes away the kernel
//! interfaces that could undo them or attack the kernel (ptrace, mounts, new namespaces,
//! keyrings, modules, BPF, io_uring, reboot, …), terminal input injection (`TIOCSTI`), and
//! every socket family but `AF_UNIX` — or, for a spec with `network: true` (the worktree
//! preparation), every family but `AF_UNIX`, `AF_INET` and `AF_INET6`.
//!
//! Unix *datagram* sockets are refused too (`SOCK_DGRAM`, and `SOCK_RAW`, which the kernel
//! turns into one): a datagram socket names its destination in every `sendmsg`, inside a
//! `msghdr` in the caller's memory, where no filter can read it and which another thread can
//! rewrite after any check. Without them, `connect` is the only call that reaches a Unix
//! socket by its address (a stream or seqpacket socket ignores or refuses a destination
//! given to `sendto`/`sendmsg`, and an inet socket cannot address a Unix one), and the
//! sandbox's PID 1 performs every `connect` itself ([`super::notify`], [`super::connect`]).
//!
//! Three filters are installed in PID 1 (and inherited by the sandboxed process): one per
//! errno of the rule list (`EPERM`, and `ENOSYS` for `clone3`, whose flags live in memory a
//! filter cannot read, so that libc falls back to `clone`, whose flags it can), and on x86_64
//! a guard refusing x32 system-call numbers, which a deny-list keyed on x86_64 numbers would
//! otherwise let through. The sandboxed process adds two of its own: [`sandboxed_only_rules`]
//! (what PID 1 needs and the sandbox must not have: `pidfd_getfd`) and the connect filter.
//! Every filter kills the process on a foreign architecture (i386 `int 0x80`), as
//! seccompiler's prologue does.

use std::collections::BTreeMap;

use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule, TargetArch, sock_filter,
};

use super::error::{SandboxError, Step};

/// When a listed system call is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ArgCheck {
    /// Argument `arg` (its low 32 bits: an `int`) differs from `value`.
    NotEqual {
        /// Argument index (0-5).
        arg: u8,
        /// The one value allowed.
        value: u32,
    },
    /// Argument `arg` (its low 32 bits) equals `value`.
    Equal {
        /// Argument index (0-5).
        arg: u8,
        /// The refused value.
        value: u32,
    },
    /// Argument `arg` (its low 32 bits) is none of `values` (one rule whose conditions
    /// must all hold).
    NoneOf {
        /// Argument index (0-5).
        arg: u8,
        /// The values allowed.
        values: &'static [u32],
    },
    /// Argument `arg` (64 bits) has `bit` set.
    HasBit {
        /// Argument index (0-5).
        arg: u8,
        /// The refused flag.
        bit: u64,
    },
    /// A `socket`/`socketpair` call's domain (argument 0) is `family` and its type's low
    /// bits (argument 1 masked with `SOCK_TYPE_MASK`, without `SOCK_NONBLOCK`/`SOCK_CLOEXEC`)
    /// are `socket_type`.
    SocketType {
        /// The address family.
        family: u32,
        /// The refused socket type.
        socket_type: u32,
    },
}

/// The type bits of `socket`'s second argument (the rest are `SOCK_NONBLOCK`/`SOCK_CLOEXEC`).
pub const SOCK_TYPE_MASK: u32 = 0xf;

/// One refused system call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SyscallRule {
    /// Its name, for people.
    pub name: &'static str,
    /// Its number on this architecture.
    pub number: i64,
    /// Refused when any of these matches; always when empty.
    pub when: Vec<ArgCheck>,
    /// The errno the caller gets.
    pub errno: i32,
}

/// Namespace flags `clone` may not carry (a new user namespace needs no capability).
pub const NAMESPACE_FLAGS: &[i32] = &[
    libc::CLONE_NEWUSER,
    libc::CLONE_NEWNS,
    libc::CLONE_NEWPID,
    libc::CLONE_NEWNET,
    libc::CLONE_NEWIPC,
    libc::CLONE_NEWUTS,
    libc::CLONE_NEWCGROUP,
];

macro_rules! always {
    ($($name:ident),* $(,)?) => {
        vec![$(SyscallRule {
            name: stringify!($name),
            number: paste_sys!($name),
            when: Vec::new(),
            errno: libc::EPERM,
        }),*]
    };
}

macro_rules! paste_sys {
    (ptrace) => {
        libc::SYS_ptrace
    };
    (process_vm_readv) => {
        libc::SYS_process_vm_readv
    };
    (process_vm_writev) => {
        libc::SYS_process_vm_writev
    };
    (pidfd_getfd) => {
        libc::SYS_pidfd_getfd
    };
    (mount) => {
        libc::SYS_mount
    };
    (umount2) => {
        libc::SYS_umount2
    };
    (pivot_root) => {
        libc::SYS_pivot_root
    };
    (chroot) => {
        libc::SYS_chroot
    };
    (unshare) => {
        libc::SYS_unshare
    };
    (setns) => {
        libc::SYS_setns
    };
    (fsopen) => {
        libc::SYS_fsopen
    };
    (fsconfig) => {
        libc::SYS_fsconfig
    };
    (fsmount) => {
        libc::SYS_fsmount
    };
    (fspick) => {
        libc::SYS_fspick
    };
    (move_mount) => {
        libc::SYS_move_mount
    };
    (open_tree) => {
        libc::SYS_open_tree
    };
    (mount_setattr) => {
        libc::SYS_mount_setattr
    };
    (keyctl) => {
        libc::SYS_keyctl
    };
    (add_key) => {
        libc::SYS_add_key
    };
    (request_key) => {
        libc::SYS_request_key
    };
    (init_module) => {
        libc::SYS_init_module
    };
    (finit_module) => {
        libc::SYS_finit_module
    };
    (delete_module) => {
        libc::SYS_delete_module
    };
    (bpf) => {
        libc::SYS_bpf
    };
    (perf_event_open) => {
        libc::SYS_perf_event_open
    };
    (reboot) => {
        libc::SYS_reboot
    };
    (kexec_load) => {
        libc::SYS_kexec_load
    };
    (kexec_file_load) => {
        libc::SYS_kexec_file_load
    };
    (swapon) => {
        libc::SYS_swapon
    };
    (swapoff) => {
        libc::SYS_swapoff
    };
    (acct) => {
        libc::SYS_acct
    };
    (settimeofday) => {
        libc::SYS_settimeofday
    };
    (clock_settime) => {
        libc::SYS_clock_settime
    };
    (userfaultfd) => {
        libc::SYS_userfaultfd
    };
    (open_by_handle_at) => {
        libc::SYS_open_by_handle_at
    };
    (name_to_handle_at) => {
        libc::SYS_name_to_handle_at
    };
    (quotactl) => {
        libc::SYS_quotactl
    };
    (quotactl_fd) => {
        libc::SYS_quotactl_fd
    };
    (lookup_dcookie) => {
        libc::SYS_lookup_dcookie
    };
    (syslog) => {
        libc::SYS_syslog
    };
    (io_uring_setup) => {
        libc::SYS_io_uring_setup
    };
    (io_uring_enter) => {
        libc::SYS_io_uring_enter
    };
    (io_uring_register) => {
        libc::SYS_io_uring_register
    };
    (iopl) => {
        libc::SYS_iopl
    };
    (ioperm) => {
        libc::SYS_ioperm
    };
    (uselib) => {
        libc::SYS_uselib
    };
}

/// `open_tree_attr` (Linux 6.15), not yet in libc; the same number on every architecture
/// with the unified table.
const SYS_OPEN_TREE_ATTR: i64 = 467;

/// Socket families a sandbox without network may create.
pub const LOCAL_FAMILIES: &[u32] = &[libc::AF_UNIX as u32];
/// Socket families a sandbox with `network: true` may create.
pub const NETWORK_FAMILIES: &[u32] = &[
    libc::AF_UNIX as u32,
    libc::AF_INET as u32,
    libc::AF_INET6 as u32,
];

/// The refused system calls of this architecture, in a fixed order; `network` allows the
/// inet socket families ([`NETWORK_FAMILIES`]) besides `AF_UNIX`.
pub fn rules(network: bool) -> Vec<SyscallRule> {
    let mut rules = always![
        // Reaching into other processes (`pidfd_getfd`: see `sandboxed_only_rules`).
        ptrace,
        process_vm_readv,
        process_vm_writev,
        // Changing the filesystem view or namespaces.
        mount,
        umount2,
        pivot_root,
        chroot,
        unshare,
        setns,
        fsopen,
        fsconfig,
        fsmount,
        fspick,
        move_mount,
        open_tree,
        mount_setattr,
        // Kernel keyrings.
        keyctl,
        add_key,
        request_key,
        // The kernel itself and the machine.
        init_module,
        finit_module,
        delete_module,
        bpf,
        perf_event_open,
        reboot,
        kexec_load,
        kexec_file_load,
        swapon,
        swapoff,
        acct,
        settimeofday,
        clock_settime,
        userfaultfd,
        open_by_handle_at,
        name_to_handle_at,
        quotactl,
        quotactl_fd,
        lookup_dcookie,
        syslog,
        // io_uring performs operations (sockets, opens) without the system calls this
        // filter sees.
        io_uring_setup,
        io_uring_enter,
        io_uring_register,
    ];
    rules.push(SyscallRule {
        name: "open_tree_attr",
        number: SYS_OPEN_TREE_ATTR,
        when: Vec::new(),
        errno: libc::EPERM,
    });
    #[cfg(target_arch = "x86_64")]
    rules.extend(always![iopl, ioperm, uselib]);

    rules.push(SyscallRule {
        name: "clone",
        number: libc::SYS_clone,
        when: NAMESPACE_FLAGS
            .iter()
            .map(|f| ArgCheck::HasBit {
                arg: 0,
                bit: *f as u64,
            })
            .collect(),
        errno: libc::EPERM,
    });
    rules.push(SyscallRule {
        name: "clone3",
        number: libc::SYS_clone3,
        when: Vec::new(),
        errno: libc::ENOSYS,
    });
    // Injecting input into a terminal (the operator's, when `sandbox-exec` runs in one):
    // the kernel compares the request as 32 bits, so does the rule.
    rules.push(SyscallRule {
        name: "ioctl",
        number: libc::SYS_ioctl,
        when: [libc::TIOCSTI, libc::TIOCLINUX]
            .iter()
            .map(|r| ArgCheck::Equal {
                arg: 1,
                value: *r as u32,
            })
            .collect(),
        errno: libc::EPERM,
    });
    for (name, number) in [
        ("socket", libc::SYS_socket),
        ("socketpair", libc::SYS_socketpair),
    ] {
        let mut when = vec![ArgCheck::NoneOf {
            arg: 0,
            values: if network {
                NETWORK_FAMILIES
            } else {
                LOCAL_FAMILIES
            },
        }];
        when.extend(UNIX_DATAGRAM_TYPES.iter().map(|t| ArgCheck::SocketType {
            family: libc::AF_UNIX as u32,
            socket_type: *t,
        }));
        rules.push(SyscallRule {
            name,
            number,
            when,
            errno: libc::EPERM,
        });
    }
    rules
}

/// Unix socket types refused: `SOCK_DGRAM`, and `SOCK_RAW`, which `AF_UNIX` turns into a
/// datagram socket.
pub const UNIX_DATAGRAM_TYPES: &[u32] = &[libc::SOCK_DGRAM as u32, libc::SOCK_RAW as u32];

/// The rules only the sandboxed process gets: what the sandbox's PID 1 must keep to serve
/// its `connect` calls (taking the caller's socket with `pidfd_getfd`), and no sandboxed
/// process may have (it would take PID 1's descriptors, the connect filter's listener among
/// them).
pub fn sandboxed_only_rules() -> Vec<SyscallRule> {
    always![pidfd_getfd]
}

/// The seccompiler architecture of the running binary.
pub fn target_arch() -> Result<TargetArch, SandboxError> {
    TargetArch::try_from(std::env::consts::ARCH).map_err(|e| {
        SandboxError::new(
            Step::Seccomp,
            format!("no seccomp filter for {}: {e}", std::env::consts::ARCH),
        )
    })
}

/// Compiles `rules` into BPF programs, one per errno, plus the x32 guard on x86_64.
pub fn compile(rules: &[SyscallRule], arch: TargetArch) -> Result<Vec<BpfProgram>, SandboxError> {
    let mut programs = compile_by_errno(rules, arch)?;
    if arch == TargetArch::x86_64 {
        programs.push(x32_guard());
    }
    Ok(programs)
}

/// Compiles [`sandboxed_only_rules`] (no x32 guard: PID 1's filters, inherited, hold one).
pub fn compile_sandboxed_only(arch: TargetArch) -> Result<Vec<BpfProgram>, SandboxError> {
    compile_by_errno(&sandboxed_only_rules(), arch)
}

/// One BPF program per errno of `rules`.
fn compile_by_errno(
    rules: &[SyscallRule],
    arch: TargetArch,
) -> Result<Vec<BpfProgram>, SandboxError> {
    let mut by_errno: BTreeMap<i32, BTreeMap<i64, Vec<SeccompRule>>> = BTreeMap::new();
    for rule in rules {
        let mut seccomp_rules = Vec::new();
        let rule_error = |e: seccompiler::BackendError| {
            SandboxError::new(Step::Seccomp, format!("rule for {}: {e}", rule.name))
        };
        let condition_error = |e: seccompiler::BackendError| {
            SandboxError::new(Step::Seccomp, format!("condition for {}: {e}", rule.name))
        };
        for check in &rule.when {
            // Each check is one seccompiler rule (any may match); the conditions of one
            // rule must all hold.
            let conditions = match *check {
                ArgCheck::NotEqual { arg, value } => vec![SeccompCondition::new(
                    arg,
                    SeccompCmpArgLen::Dword,
                    SeccompCmpOp::Ne,
                    u64::from(value),
                )],
                ArgCheck::Equal { arg, value } => vec![SeccompCondition::new(
                    arg,
                    SeccompCmpArgLen::Dword,
                    SeccompCmpOp::Eq,
                    u64::from(value),
                )],
                ArgCheck::HasBit { arg, bit } => vec![SeccompCondition::new(
                    arg,
                    SeccompCmpArgLen::Qword,
                    SeccompCmpOp::MaskedEq(bit),
                    bit,
                )],
                ArgCheck::NoneOf { arg, values } => values
                    .iter()
                    .map(|v| {
                        SeccompCondition::new(
                            arg,
                            SeccompCmpArgLen::Dword,
                            SeccompCmpOp::Ne,
                            u64::from(*v),
                        )
                    })
                    .collect(),
                ArgCheck::SocketType {
                    family,
                    socket_type,
                } => vec![
                    SeccompCondition::new(
                        0,
                        SeccompCmpArgLen::Dword,
                        SeccompCmpOp::Eq,
                        u64::from(family),
                    ),
                    SeccompCondition::new(
                        1,
                        SeccompCmpArgLen::Dword,
                        SeccompCmpOp::MaskedEq(u64::from(SOCK_TYPE_MASK)),
                        u64::from(socket_type),
                    ),
                ],
            }
            .into_iter()
            .collect::<Result<Vec<_>, _>>()
            .map_err(condition_error)?;
            seccomp_rules.push(SeccompRule::new(conditions).map_err(rule_error)?);
        }
        let previous = by_errno
            .entry(rule.errno)
            .or_default()
            .insert(rule.number, seccomp_rules);
        if previous.is_some() {
            return Err(SandboxError::new(
                Step::Seccomp,
                format!("{} is listed twice", rule.name),
            ));
        }
    }
    let mut programs = Vec::new();
    for (errno, map) in by_errno {
        let errno_u32 = u32::try_from(errno)
            .map_err(|e| SandboxError::new(Step::Seccomp, format!("errno {errno}: {e}")))?;
        let filter = SeccompFilter::new(
            map,
            SeccompAction::Allow,
            SeccompAction::Errno(errno_u32),
            arch,
        )
        .map_err(|e| SandboxError::new(Step::Seccomp, format!("filter for errno {errno}: {e}")))?;
        let program: BpfProgram = filter.try_into().map_err(|e: seccompiler::BackendError| {
            SandboxError::new(
                Step::Seccomp,
                format!("compile filter for errno {errno}: {e}"),
            )
        })?;
        programs.push(program);
    }
    Ok(programs)
}

const AUDIT_ARCH_X86_64: u32 = 62 | 0x8000_0000 | 0x4000_0000;
const X32_SYSCALL_BIT: u32 = 0x4000_0000;
const BPF_LD_W_ABS: u16 = 0x20;
const BPF_JEQ_K: u16 = 0x15;
const BPF_JGE_K: u16 = 0x35;
const BPF_RET_K: u16 = 0x06;

/// On x86_64: refuse (`ENOSYS`) every system-call number with the x32 bit set.
pub fn x32_guard() -> BpfProgram {
    let insn = |code, jt, jf, k| sock_filter { code, jt, jf, k };
    vec![
        insn(BPF_LD_W_ABS, 0, 0, 4),              // A = arch
        insn(BPF_JEQ_K, 0, 3, AUDIT_ARCH_X86_64), // not x86_64: allow (others kill)
        insn(BPF_LD_W_ABS, 0, 0, 0),              // A = nr
        insn(BPF_JGE_K, 0, 1, X32_SYSCALL_BIT),   // x32 number?
        insn(
            BPF_RET_K,
            0,
            0,
            libc::SECCOMP_RET_ERRNO | libc::ENOSYS as u32,
        ),
        insn(BPF_RET_K, 0, 0, libc::SECCOMP_RET_ALLOW),
    ]
}

/// Installs the programs on the calling thread (no-new-privs must already be set).
pub fn install(programs: &[BpfProgram]) -> Result<(), SandboxError> {
    for (i, program) in programs.iter().enumerate() {
        seccompiler::apply_filter(program)
            .map_err(|e| SandboxError::new(Step::Seccomp, format!("install filter {i}: {e}")))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn find<'a>(rules: &'a [SyscallRule], name: &str) -> &'a SyscallRule {
        rules.iter().find(|r| r.name == name).unwrap()
    }

    #[test]
    fn the_rule_list_refuses_what_the_design_names() {
        let rules = rules(false);
        for name in [
            "ptrace",
            "process_vm_readv",
            "process_vm_writev",
            "mount",
            "umount2",
            "pivot_root",
            "chroot",
            "unshare",
            "setns",
            "keyctl",
            "add_key",
            "request_key",
            "init_module",
            "finit_module",
            "delete_module",
            "bpf",
            "perf_event_open",
            "reboot",
            "kexec_load",
            "kexec_file_load",
            "swapon",
            "swapoff",
            "acct",
            "settimeofday",
            "clock_settime",
            "userfaultfd",
            "open_by_handle_at",
            "name_to_handle_at",
            "quotactl",
            "lookup_dcookie",
            "io_uring_setup",
            "open_tree",
            "fsopen",
            "move_mount",
        ] {
            let r = find(&rules, name);
            assert!(r.when.is_empty(), "{name} must be refused unconditionally");
            assert_eq!(r.errno, libc::EPERM, "{name}");
        }
        let unix_datagrams = [
            ArgCheck::SocketType {
                family: libc::AF_UNIX as u32,
                socket_type: libc::SOCK_DGRAM as u32,
            },
            ArgCheck::SocketType {
                family: libc::AF_UNIX as u32,
                socket_type: libc::SOCK_RAW as u32,
            },
        ];
        let mut expected = vec![ArgCheck::NoneOf {
            arg: 0,
            values: &[libc::AF_UNIX as u32],
        }];
        expected.extend(unix_datagrams);
        assert_eq!(find(&rules, "socket").when, expected);
        assert_eq!(find(&rules, "socketpair").when, find(&rules, "socket").when);
        assert_eq!(find(&rules, "clone3").errno, libc::ENOSYS);
        assert!(find(&rules, "ioctl").when.contains(&ArgCheck::Equal {
            arg: 1,
            value: libc::TIOCSTI as u32
        }));
        let clone = find(&rules, "clone");
        assert_eq!(clone.when.len(), NAMESPACE_FLAGS.len());
        assert!(clone.when.contains(&ArgCheck::HasBit {
            arg: 0,
            bit: libc::CLONE_NEWUSER as u64
        }));
        // Fork and threads stay possible: no unconditional rule on clone, none on vfork.
        assert!(!rules.iter().any(|r| r.name == "vfork" || r.name == "fork"));
        // Every number appears once.
        let mut numbers: Vec<i64> = rules.iter().map(|r| r.number).collect();
        numbers.sort_unstable();
        numbers.dedup();
        assert_eq!(numbers.len(), rules.len());
    }

    #[test]
    fn network_allows_inet_sockets_and_changes_nothing_else() {
        let (without, with) = (rules(false), rules(true));
        assert_eq!(
            find(&with, "socket").when[0],
            ArgCheck::NoneOf {
                arg: 0,
                values: &[
                    libc::AF_UNIX as u32,
                    libc::AF_INET as u32,
                    libc::AF_INET6 as u32
                ]
            }
        );
        // Unix datagram sockets stay refused with the network too.
        assert_eq!(
            find(&with, "socket").when[1..],
            find(&without, "socket").when[1..]
        );
        assert_eq!(find(&with, "socketpair").when, find(&with, "socket").when);
        let others = |rules: &[SyscallRule]| -> Vec<SyscallRule> {
            rules
                .iter()
                .filter(|r| r.name != "socket" && r.name != "socketpair")
                .cloned()
                .collect()
        };
        assert_eq!(others(&with), others(&without));
        assert_eq!(with.len(), without.len());
    }

    #[test]
    fn pid_1_keeps_pidfd_getfd_and_the_sandboxed_process_loses_it() {
        assert!(!rules(false).iter().any(|r| r.name == "pidfd_getfd"));
        assert!(!rules(true).iter().any(|r| r.name == "pidfd_getfd"));
        let only = sandboxed_only_rules();
        assert_eq!(only.len(), 1);
        assert_eq!(only[0].name, "pidfd_getfd");
        assert!(only[0].when.is_empty());
        assert_eq!(only[0].errno, libc::EPERM);
        let programs = compile_sandboxed_only(target_arch().unwrap()).unwrap();
        assert_eq!(programs.len(), 1, "one errno, no second x32 guard");
    }

    #[test]
    fn compiles_for_this_architecture() {
        let arch = target_arch().unwrap();
        assert!(compile(&rules(true), arch).is_ok());
        let programs = compile(&rules(false), arch).unwrap();
        let expected = if arch == TargetArch::x86_64 { 3 } else { 2 };
        assert_eq!(programs.len(), expected);
        for p in &programs {
            assert!(!p.is_empty() && p.len() < 4096);
        }
    }

    #[test]
    fn x32_guard_checks_arch_then_number() {
        let g = x32_guard();
        assert_eq!(g.len(), 6);
        assert_eq!(g[1].k, AUDIT_ARCH_X86_64);
        assert_eq!(g[3].k, 0x4000_0000);
        assert_eq!(g[4].k, libc::SECCOMP_RET_ERRNO | libc::ENOSYS as u32);
        assert_eq!(g[5].k, libc::SECCOMP_RET_ALLOW);
    }
}
