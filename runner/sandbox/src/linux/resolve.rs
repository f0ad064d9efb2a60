//! Step 1: facts about the host, gathered once before anything changes, and the spec's
//! validation against them.
//!
//! Everything later (the mount plan, the Landlock rules) is computed from a [`HostLayout`]
//! by pure functions, so a layout can be written by hand in unit tests. All host paths in it
//! are canonical (no symlink components): after the first `pivot_root` they are reached
//! under `/oldroot`, where an absolute symlink would resolve against the wrong root.

use std::collections::BTreeMap;
use std::fs;
use std::io;
use std::os::unix::fs::FileTypeExt;
use std::path::{Component, Path, PathBuf};

use nix::mount::MsFlags;
use nix::sys::statvfs::{FsFlags, statvfs};

use super::error::{AtStep, SandboxError, Step};
use crate::spec::SandboxSpec;

/// Top-level system paths exposed read-only (directories) or recreated (symlinks), if present.
pub const SYSTEM_PATHS: &[&str] = &[
    "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc",
];

/// Paths under the exposed system directories that hold host secrets: hidden behind an empty
/// file or an empty read-only tmpfs.
pub const SECRET_PATHS: &[&str] = &[
    "/etc/shadow",
    "/etc/shadow-",
    "/etc/gshadow",
    "/etc/gshadow-",
    "/etc/ssh",
    "/etc/ssl/private",
    "/etc/security/opasswd",
];

/// File names hidden at the top of every `readOnly` path: cargo's registry tokens
/// (`~/.cargo/credentials{,.toml}`), the usual toolchain directory to expose.
pub const READ_ONLY_SECRET_NAMES: &[&str] = &["credentials", "credentials.toml"];

/// Device nodes bound into the minimal `/dev`, if present on the host.
pub const DEVICES: &[&str] = &[
    "/dev/null",
    "/dev/zero",
    "/dev/full",
    "/dev/random",
    "/dev/urandom",
    "/dev/tty",
];

/// Targets the sandbox builds itself; the worktree and extra paths must keep out of them.
pub const RESERVED_TARGETS: &[&str] = &["/tmp", "/dev", "/proc"];

/// Directory or regular file (the two things a bind mount can be).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum NodeKind {
    /// A directory.
    Dir,
    /// A regular file (or a device node, for the `/dev` binds).
    File,
}

/// What a top-level system path is on the host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HostEntry {
    /// A real directory: bound read-only.
    Dir,
    /// A symlink (Debian's `/bin -> usr/bin`): recreated with the same target.
    Symlink(PathBuf),
}

/// Host facts the sandbox is planned from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostLayout {
    /// The worktree, canonical.
    pub worktree: PathBuf,
    /// What the worktree's `.git` is: a file (a git worktree's pointer) or a directory (a
    /// main checkout); `None` for a plain directory. Bound read-only over itself.
    pub dot_git: Option<NodeKind>,
    /// Object stores the worktree's `.git` borrows from (its alternates),
    /// canonical, none inside another; bound read-only at the same path.
    pub git_metadata: Vec<PathBuf>,
    /// The spec's `readOnly` paths, canonical, with their kind.
    pub read_only: Vec<(PathBuf, NodeKind)>,
    /// The spec's `attachments` directory, canonical: bound read-only at
    /// [`crate::spec::ATTACHMENTS_DIR`] in the worktree.
    pub attachments: Option<PathBuf>,
    /// The system paths present on the host.
    pub system: Vec<(PathBuf, HostEntry)>,
    /// Secrets visible through the exposed paths, canonical, with their kind.
    pub secrets: Vec<(PathBuf, NodeKind)>,
    /// Device nodes present on the host.
    pub devices: Vec<PathBuf>,
    /// Per bind source, the mount flags the kernel locks in a user namespace (read-only,
    /// nosuid, nodev, noexec, atime): a bind remount must repeat them or fail with `EPERM`.
    pub locked_flags: BTreeMap<PathBuf, MsFlags>,
}

/// Gathers the [`HostLayout`] for `spec` (step 1) and validates the spec against it.
pub fn resolve(spec: &SandboxSpec) -> Result<HostLayout, SandboxError> {
    validate_spec_shape(spec)?;
    let worktree = resolve_worktree(&spec.worktree)?;
    let (dot_git, git_metadata) = resolve_git(&worktree)?;
    let read_only = resolve_read_only(&spec.read_only)?;
    let attachments = spec
        .attachments
        .as_deref()
        .map(resolve_attachments)
        .transpose()?;
    let system = resolve_system()?;
    let mut exposed: Vec<PathBuf> = system
        .iter()
        .filter(|(_, e)| *e == HostEntry::Dir)
        .map(|(p, _)| p.clone())
        .collect();
    exposed.extend(read_only.iter().map(|(p, _)| p.clone()));
    let secrets = resolve_secrets(&exposed, &read_only)?;
    let devices = resolve_devices()?;

    let mut sources: Vec<PathBuf> = vec![worktree.clone()];
    if dot_git.is_some() {
        sources.push(worktree.join(".git"));
    }
    sources.extend(git_metadata.iter().cloned());
    sources.extend(read_only.iter().map(|(p, _)| p.clone()));
    sources.extend(attachments.iter().cloned());
    sources.extend(exposed.iter().cloned());
    sources.extend(devices.iter().cloned());
    let mut locked_flags = BTreeMap::new();
    for source in sources {
        let flags = locked_mount_flags(&source)?;
        locked_flags.insert(source, flags);
    }

    let layout = HostLayout {
        worktree,
        dot_git,
        git_metadata,
        read_only,
        attachments,
        system,
        secrets,
        devices,
        locked_flags,
    };
    validate_against_layout(spec, &layout)?;
    Ok(layout)
}

/// Checks of the spec alone: absolute normal paths, a usable hostname, env and fds.
pub fn validate_spec_shape(spec: &SandboxSpec) -> Result<(), SandboxError> {
    let err = |d: String| Err(SandboxError::new(Step::ValidateSpec, d));
    if !is_normal_absolute(&spec.mount_point) || spec.mount_point == Path::new("/") {
        return err(format!(
            "mountPoint {} must be an absolute path without `.`/`..`, other than /",
            spec.mount_point.display()
        ));
    }
    for p in &spec.read_only {
        if !p.is_absolute() {
            return err(format!("readOnly path {} is not absolute", p.display()));
        }
    }
    if let Some(p) = &spec.attachments
        && !p.is_absolute()
    {
        return err(format!("attachments {} is not absolute", p.display()));
    }
    if spec.hostname.is_empty()
        || spec.hostname.len() > 64
        || !spec
            .hostname
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'.')
    {
        return err(format!(
            "hostname {:?} must be 1-64 letters, digits, `-` or `.`",
            spec.hostname
        ));
    }
    for (k, v) in &spec.env {
        if k.is_empty() || k.contains('=') || k.contains('\0') || v.contains('\0') {
            return err(format!("env variable {k:?} has an invalid name or value"));
        }
    }
    if let Some(fd) = spec.keep_fds.iter().find(|fd| **fd <= 2) {
        return err(format!(
            "keepFds lists {fd}: descriptors 0-2 are always kept, list only others"
        ));
    }
    let l = &spec.limits;
    if l.max_processes < 4 {
        return err(format!(
            "limits.maxProcesses {} is too small (the sandbox needs at least 4)",
            l.max_processes
        ));
    }
    for (name, v) in [
        ("memoryBytes", l.memory_bytes),
        ("fileSizeBytes", l.file_size_bytes),
        ("cpuSeconds", l.cpu_seconds),
        ("tmpBytes", l.tmp_bytes),
    ] {
        if v == 0 {
            return err(format!("limits.{name} must be positive"));
        }
    }
    Ok(())
}

/// Checks that need the resolved paths: nothing may overlap the mount point or the
/// sandbox's own mounts, and no read-only path may expose the worktree's surroundings
/// (`<repo>/.codebutler`, other worktrees, the main checkout).
pub fn validate_against_layout(
    spec: &SandboxSpec,
    layout: &HostLayout,
) -> Result<(), SandboxError> {
    let err = |d: String| Err(SandboxError::new(Step::ValidateSpec, d));
    let mp = &spec.mount_point;
    if layout
        .locked_flags
        .get(&layout.worktree)
        .is_some_and(|f| f.contains(MsFlags::MS_RDONLY))
    {
        return err(format!(
            "the worktree {} is on a read-only mount",
            layout.worktree.display()
        ));
    }
    let mut system_targets: Vec<&Path> = SYSTEM_PATHS.iter().map(Path::new).collect();
    system_targets.extend(RESERVED_TARGETS.iter().map(Path::new));
    for t in &system_targets {
        if overlaps(mp, t) {
            return err(format!(
                "mountPoint {} overlaps the sandbox's own {}",
                mp.display(),
                t.display()
            ));
        }
    }
    for (p, _) in &layout.read_only {
        if p == Path::new("/") {
            return err("readOnly path / would expose the whole host".into());
        }
        if overlaps(p, mp) {
            return err(format!(
                "readOnly path {} overlaps mountPoint {}",
                p.display(),
                mp.display()
            ));
        }
        for t in ["/dev", "/proc"] {
            if overlaps(p, Path::new(t)) {
                return err(format!("readOnly path {} overlaps {t}", p.display()));
            }
        }
        if Path::new("/tmp").starts_with(p) {
            return err(format!(
                "readOnly path {} would cover the private /tmp",
                p.display()
            ));
        }
        if layout.worktree.starts_with(p) {
            return err(format!(
                "readOnly path {} contains the worktree (it would expose the repository's \
                 .codebutler and other worktrees)",
                p.display()
            ));
        }
        if let Some(g) = layout.git_metadata.iter().find(|g| g.starts_with(p)) {
            return err(format!(
                "readOnly path {} contains the git metadata {} (it would expose the main \
                 checkout)",
                p.display(),
                g.display()
            ));
        }
    }
    if let Some(a) = &layout.attachments {
        // Inside the worktree the runner could have made it; around it, it would expose
        // the worktree's surroundings.
        if overlaps(a, &layout.worktree) {
            return err(format!(
                "attachments {} overlaps the worktree {}",
                a.display(),
                layout.worktree.display()
            ));
        }
    }
    for g in &layout.git_metadata {
        if overlaps(g, mp) {
            return err(format!(
                "git metadata {} overlaps mountPoint {}",
                g.display(),
                mp.display()
            ));
        }
        for t in &system_targets {
            if t.starts_with(g) || (g.starts_with(t) && *t != Path::new("/tmp")) {
                return err(format!(
                    "git metadata {} overlaps the sandbox's own {}",
                    g.display(),
                    t.display()
                ));
            }
        }
    }
    Ok(())
}

/// `a` equals, contains or lies inside `b`.
pub fn overlaps(a: &Path, b: &Path) -> bool {
    a.starts_with(b) || b.starts_with(a)
}

fn is_normal_absolute(p: &Path) -> bool {
    p.is_absolute()
        && p.components()
            .all(|c| matches!(c, Component::RootDir | Component::Normal(_)))
}

fn resolve_worktree(worktree: &Path) -> Result<PathBuf, SandboxError> {
    let canonical = fs::canonicalize(worktree).at(Step::ResolveWorktree, || {
        format!("canonicalize {}", worktree.display())
    })?;
    if !canonical.is_dir() {
        return Err(SandboxError::new(
            Step::ResolveWorktree,
            format!("{} is not a directory", canonical.display()),
        ));
    }
    Ok(canonical)
}

/// Reads the worktree's `.git`, which must be a directory of its own (a CodeButler worktree:
/// its thread's history only) or absent. Its object stores named in
/// `.git/objects/info/alternates` (absolute paths; the controller writes the file and the
/// sandbox keeps `.git` read-only) are returned, to be bound read-only at their own paths so
/// git inside finds them.
///
/// A `gitdir:` file (a linked worktree of `git worktree add`) is refused: its metadata is
/// the main repository's, with every branch, stash and config of the person and of other
/// threads.
fn resolve_git(worktree: &Path) -> Result<(Option<NodeKind>, Vec<PathBuf>), SandboxError> {
    let dot_git = worktree.join(".git");
    let meta = match fs::symlink_metadata(&dot_git) {
        Ok(m) => m,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok((None, Vec::new())),
        Err(e) => {
            return Err(SandboxError::new(
                Step::ResolveGitMetadata,
                format!("stat {}: {e}", dot_git.display()),
            ));
        }
    };
    if meta.is_file() {
        return Err(SandboxError::new(
            Step::ResolveGitMetadata,
            format!(
                "{} is a `gitdir:` file: a linked worktree would expose the main repository's \
                 git metadata (every branch, stash and config); a sandboxed worktree needs a \
                 .git directory of its own",
                dot_git.display()
            ),
        ));
    }
    if !meta.is_dir() {
        return Err(SandboxError::new(
            Step::ResolveGitMetadata,
            format!("{} is neither a file nor a directory", dot_git.display()),
        ));
    }
    let alternates = dot_git.join("objects/info/alternates");
    let text = match fs::read_to_string(&alternates) {
        Ok(text) => text,
        Err(e) if e.kind() == io::ErrorKind::NotFound => String::new(),
        Err(e) => {
            return Err(SandboxError::new(
                Step::ResolveGitMetadata,
                format!("read {}: {e}", alternates.display()),
            ));
        }
    };
    let mut dirs = Vec::new();
    for line in text.lines().map(str::trim) {
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let path = Path::new(line);
        if !path.is_absolute() {
            return Err(SandboxError::new(
                Step::ResolveGitMetadata,
                format!(
                    "{} names {line:?}: object stores must be absolute paths",
                    alternates.display()
                ),
            ));
        }
        dirs.push(canonical_dir(path, "object store")?);
    }
    Ok((Some(NodeKind::Dir), outermost(dirs)))
}

fn canonical_dir(p: &Path, what: &str) -> Result<PathBuf, SandboxError> {
    let c = fs::canonicalize(p).at(Step::ResolveGitMetadata, || {
        format!("canonicalize {what} {}", p.display())
    })?;
    if !c.is_dir() {
        return Err(SandboxError::new(
            Step::ResolveGitMetadata,
            format!("{what} {} is not a directory", c.display()),
        ));
    }
    Ok(c)
}

/// Sorted, deduplicated, and without paths nested in another of the list.
pub fn outermost(mut paths: Vec<PathBuf>) -> Vec<PathBuf> {
    paths.sort();
    paths.dedup();
    let mut out: Vec<PathBuf> = Vec::new();
    for p in paths {
        if !out.iter().any(|o| p.starts_with(o)) {
            out.push(p);
        }
    }
    out
}

fn resolve_read_only(paths: &[PathBuf]) -> Result<Vec<(PathBuf, NodeKind)>, SandboxError> {
    let mut out = Vec::new();
    for p in paths {
        let c = fs::canonicalize(p).at(Step::ResolveReadOnly, || {
            format!("canonicalize {}", p.display())
        })?;
        let meta =
            fs::metadata(&c).at(Step::ResolveReadOnly, || format!("stat {}", c.display()))?;
        let kind = if meta.is_dir() {
            NodeKind::Dir
        } else if meta.is_file() {
            NodeKind::File
        } else {
            return Err(SandboxError::new(
                Step::ResolveReadOnly,
                format!("{} is neither a file nor a directory", c.display()),
            ));
        };
        if !out.iter().any(|(o, _)| o == &c) {
            out.push((c, kind));
        }
    }
    out.sort();
    Ok(out)
}

/// The attachments directory, canonical; it must be a directory.
fn resolve_attachments(path: &Path) -> Result<PathBuf, SandboxError> {
    let c = fs::canonicalize(path).at(Step::ResolveReadOnly, || {
        format!("canonicalize attachments {}", path.display())
    })?;
    if !c.is_dir() {
        return Err(SandboxError::new(
            Step::ResolveReadOnly,
            format!("attachments {} is not a directory", c.display()),
        ));
    }
    Ok(c)
}

fn resolve_system() -> Result<Vec<(PathBuf, HostEntry)>, SandboxError> {
    let mut out = Vec::new();
    for p in SYSTEM_PATHS {
        let meta = match fs::symlink_metadata(p) {
            Ok(m) => m,
            Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
            Err(e) => {
                return Err(SandboxError::new(
                    Step::ResolveSystem,
                    format!("stat {p}: {e}"),
                ));
            }
        };
        let entry = if meta.file_type().is_symlink() {
            HostEntry::Symlink(
                fs::read_link(p).at(Step::ResolveSystem, || format!("readlink {p}"))?,
            )
        } else if meta.is_dir() {
            HostEntry::Dir
        } else {
            return Err(SandboxError::new(
                Step::ResolveSystem,
                format!("{p} is neither a directory nor a symlink"),
            ));
        };
        out.push((PathBuf::from(p), entry));
    }
    if !out
        .iter()
        .any(|(p, e)| p == Path::new("/usr") && *e == HostEntry::Dir)
    {
        return Err(SandboxError::new(
            Step::ResolveSystem,
            "/usr is not a directory",
        ));
    }
    Ok(out)
}

fn resolve_secrets(
    exposed: &[PathBuf],
    read_only: &[(PathBuf, NodeKind)],
) -> Result<Vec<(PathBuf, NodeKind)>, SandboxError> {
    let mut candidates: Vec<PathBuf> = SECRET_PATHS.iter().map(PathBuf::from).collect();
    for (p, kind) in read_only {
        if *kind == NodeKind::Dir {
            candidates.extend(READ_ONLY_SECRET_NAMES.iter().map(|n| p.join(n)));
        }
    }
    let mut out = Vec::new();
    for c in candidates {
        let canonical = match fs::canonicalize(&c) {
            Ok(p) => p,
            Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
            Err(e) => {
                return Err(SandboxError::new(
                    Step::ResolveSystem,
                    format!("canonicalize secret {}: {e}", c.display()),
                ));
            }
        };
        // Only what the sandbox would otherwise see needs hiding.
        if !exposed.iter().any(|e| canonical.starts_with(e)) {
            continue;
        }
        let meta = fs::metadata(&canonical).at(Step::ResolveSystem, || {
            format!("stat secret {}", canonical.display())
        })?;
        let kind = if meta.is_dir() {
            NodeKind::Dir
        } else {
            NodeKind::File
        };
        if !out.iter().any(|(o, _)| o == &canonical) {
            out.push((canonical, kind));
        }
    }
    Ok(out)
}

fn resolve_devices() -> Result<Vec<PathBuf>, SandboxError> {
    let mut out = Vec::new();
    for d in DEVICES {
        match fs::metadata(d) {
            Ok(m) if m.file_type().is_char_device() => out.push(PathBuf::from(d)),
            Ok(_) => {
                return Err(SandboxError::new(
                    Step::ResolveSystem,
                    format!("{d} is not a character device"),
                ));
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => {
                return Err(SandboxError::new(
                    Step::ResolveSystem,
                    format!("stat {d}: {e}"),
                ));
            }
        }
    }
    for required in ["/dev/null", "/dev/zero", "/dev/urandom"] {
        if !out.iter().any(|d| d == Path::new(required)) {
            return Err(SandboxError::new(
                Step::ResolveSystem,
                format!("{required} is missing on the host"),
            ));
        }
    }
    Ok(out)
}

/// The flags of the mount holding `path` that a bind remount in a user namespace must keep.
fn locked_mount_flags(path: &Path) -> Result<MsFlags, SandboxError> {
    let st = statvfs(path).at(Step::ReadMountFlags, || {
        format!("statvfs {}", path.display())
    })?;
    Ok(locked_flags_from(st.flags()))
}

/// Maps `statvfs` flags to the `MS_*` flags a remount must repeat: ro, nosuid, nodev,
/// noexec and the atime mode (with neither `noatime` nor `relatime`, it is strictatime).
pub fn locked_flags_from(f: FsFlags) -> MsFlags {
    let mut out = MsFlags::empty();
    for (st, ms) in [
        (FsFlags::ST_RDONLY, MsFlags::MS_RDONLY),
        (FsFlags::ST_NOSUID, MsFlags::MS_NOSUID),
        (FsFlags::ST_NODEV, MsFlags::MS_NODEV),
        (FsFlags::ST_NOEXEC, MsFlags::MS_NOEXEC),
        (FsFlags::ST_NOATIME, MsFlags::MS_NOATIME),
        (FsFlags::ST_NODIRATIME, MsFlags::MS_NODIRATIME),
        (FsFlags::ST_RELATIME, MsFlags::MS_RELATIME),
    ] {
        if f.contains(st) {
            out |= ms;
        }
    }
    if !f.intersects(FsFlags::ST_NOATIME | FsFlags::ST_RELATIME) {
        out |= MsFlags::MS_STRICTATIME;
    }
    out
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::spec::SandboxSpec;

    pub(crate) fn layout() -> HostLayout {
        HostLayout {
            worktree: PathBuf::from("/srv/repo/.codebutler/branches/t"),
            dot_git: Some(NodeKind::File),
            git_metadata: vec![PathBuf::from("/srv/repo/.git")],
            read_only: vec![(PathBuf::from("/root/.cargo"), NodeKind::Dir)],
            attachments: None,
            system: vec![
                (PathBuf::from("/usr"), HostEntry::Dir),
                (
                    PathBuf::from("/bin"),
                    HostEntry::Symlink(PathBuf::from("usr/bin")),
                ),
                (PathBuf::from("/etc"), HostEntry::Dir),
            ],
            secrets: vec![
                (PathBuf::from("/etc/shadow"), NodeKind::File),
                (PathBuf::from("/etc/ssh"), NodeKind::Dir),
            ],
            devices: vec![PathBuf::from("/dev/null"), PathBuf::from("/dev/urandom")],
            locked_flags: BTreeMap::new(),
        }
    }

    #[test]
    fn a_sane_spec_validates() {
        let spec = SandboxSpec::for_worktree("/srv/repo/.codebutler/branches/t");
        validate_spec_shape(&spec).unwrap();
        validate_against_layout(&spec, &layout()).unwrap();
    }

    fn refused(spec: &SandboxSpec, layout: &HostLayout, needle: &str) {
        let e = validate_spec_shape(spec)
            .and_then(|()| validate_against_layout(spec, layout))
            .unwrap_err();
        assert_eq!(e.step, Step::ValidateSpec);
        assert!(
            e.detail.contains(needle),
            "{needle:?} not in {:?}",
            e.detail
        );
    }

    #[test]
    fn mount_point_must_be_absolute_normal_and_apart() {
        let l = layout();
        for (mp, needle) in [
            ("workspace", "absolute"),
            ("/", "other than /"),
            ("/work/../etc", "absolute"),
            ("/tmp/w", "overlaps the sandbox's own /tmp"),
            ("/usr/src", "overlaps the sandbox's own /usr"),
            ("/proc", "overlaps the sandbox's own /proc"),
        ] {
            let mut spec = SandboxSpec::for_worktree("/w");
            spec.mount_point = PathBuf::from(mp);
            refused(&spec, &l, needle);
        }
    }

    #[test]
    fn read_only_paths_must_not_expose_the_repository() {
        let spec = SandboxSpec::for_worktree("/w");
        for (ro, needle) in [
            ("/srv/repo", "contains the worktree"),
            ("/srv", "contains the worktree"),
            ("/", "whole host"),
            ("/proc/1", "overlaps /proc"),
            ("/workspace/x", "overlaps mountPoint"),
        ] {
            let mut l = layout();
            l.read_only = vec![(PathBuf::from(ro), NodeKind::Dir)];
            refused(&spec, &l, needle);
        }
        let mut l = layout();
        l.worktree = PathBuf::from("/elsewhere/w");
        l.read_only = vec![(PathBuf::from("/srv/repo"), NodeKind::Dir)];
        refused(&spec, &l, "contains the git metadata");
    }

    #[test]
    fn attachments_must_lie_apart_from_the_worktree() {
        let spec = SandboxSpec::for_worktree("/srv/repo/.codebutler/branches/t");
        for (dir, needle) in [
            (
                "/srv/repo/.codebutler/branches/t/logs",
                "overlaps the worktree",
            ),
            ("/srv/repo", "overlaps the worktree"),
            ("/", "overlaps the worktree"),
        ] {
            let mut l = layout();
            l.attachments = Some(PathBuf::from(dir));
            refused(&spec, &l, needle);
        }
        let mut l = layout();
        l.attachments = Some(PathBuf::from("/srv/repo/.codebutler/attachments/C1-1.1"));
        validate_against_layout(&spec, &l).unwrap();
        let mut spec = SandboxSpec::for_worktree("/w");
        spec.attachments = Some(PathBuf::from("relative"));
        refused(&spec, &layout(), "not absolute");
    }

    #[test]
    fn git_metadata_must_not_collide_with_sandbox_mounts() {
        let spec = SandboxSpec::for_worktree("/w");
        let mut l = layout();
        l.git_metadata = vec![PathBuf::from("/workspace/.git")];
        refused(&spec, &l, "overlaps mountPoint");
        l.git_metadata = vec![PathBuf::from("/usr/share/repo.git")];
        refused(&spec, &l, "overlaps the sandbox's own /usr");
        // Under /tmp is fine: it is bound on top of the private /tmp.
        l.git_metadata = vec![PathBuf::from("/tmp/x/repo/.git")];
        validate_against_layout(&spec, &l).unwrap();
    }

    #[test]
    fn shape_checks() {
        let l = layout();
        let mut spec = SandboxSpec::for_worktree("/w");
        spec.hostname = "bad host".into();
        refused(&spec, &l, "hostname");
        let mut spec = SandboxSpec::for_worktree("/w");
        spec.env.insert("A=B".into(), "x".into());
        refused(&spec, &l, "env variable");
        let mut spec = SandboxSpec::for_worktree("/w");
        spec.keep_fds = vec![3, 1];
        refused(&spec, &l, "keepFds");
        let mut spec = SandboxSpec::for_worktree("/w");
        spec.read_only = vec![PathBuf::from("relative")];
        refused(&spec, &l, "not absolute");
        let mut spec = SandboxSpec::for_worktree("/w");
        spec.limits.max_processes = 1;
        refused(&spec, &l, "maxProcesses");
    }

    #[test]
    fn outermost_drops_nested_paths() {
        let got = outermost(vec![
            PathBuf::from("/r/.git/worktrees/t"),
            PathBuf::from("/r/.git"),
            PathBuf::from("/r/.git"),
            PathBuf::from("/other/.git"),
        ]);
        assert_eq!(
            got,
            vec![PathBuf::from("/other/.git"), PathBuf::from("/r/.git")]
        );
    }

    #[test]
    fn statvfs_flags_map_to_locked_mount_flags() {
        assert_eq!(
            locked_flags_from(FsFlags::ST_NOSUID | FsFlags::ST_RELATIME),
            MsFlags::MS_NOSUID | MsFlags::MS_RELATIME
        );
        assert_eq!(
            locked_flags_from(FsFlags::ST_RDONLY),
            MsFlags::MS_RDONLY | MsFlags::MS_STRICTATIME
        );
    }

    #[test]
    fn resolves_a_worktree_with_its_own_git_and_object_stores() {
        let tmp = tempfile::tempdir().unwrap();
        let store = tmp.path().join("bases/abc/objects");
        let wt = tmp.path().join("branches/t");
        fs::create_dir_all(&store).unwrap();
        fs::create_dir_all(wt.join(".git/objects/info")).unwrap();
        let canonical = fs::canonicalize(&wt).unwrap();
        // No alternates: only the worktree's own .git.
        assert_eq!(
            resolve_git(&canonical).unwrap(),
            (Some(NodeKind::Dir), Vec::new())
        );
        fs::write(
            wt.join(".git/objects/info/alternates"),
            format!("{}\n\n# note\n", store.display()),
        )
        .unwrap();
        assert_eq!(
            resolve_git(&canonical).unwrap(),
            (Some(NodeKind::Dir), vec![fs::canonicalize(&store).unwrap()])
        );
        // Relative or dangling stores are errors of their own step.
        fs::write(wt.join(".git/objects/info/alternates"), "../x/objects\n").unwrap();
        assert_eq!(
            resolve_git(&canonical).unwrap_err().step,
            Step::ResolveGitMetadata
        );
        fs::write(
            wt.join(".git/objects/info/alternates"),
            "/nonexistent/objects\n",
        )
        .unwrap();
        assert_eq!(
            resolve_git(&canonical).unwrap_err().step,
            Step::ResolveGitMetadata
        );
        // No .git at all: a plain directory.
        let plain = tmp.path().join("plain");
        fs::create_dir_all(&plain).unwrap();
        assert_eq!(resolve_git(&plain).unwrap(), (None, Vec::new()));
    }

    #[test]
    fn a_linked_worktree_is_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let repo = tmp.path().join("repo");
        let wt = repo.join(".codebutler/branches/t");
        fs::create_dir_all(repo.join(".git/worktrees/t")).unwrap();
        fs::create_dir_all(&wt).unwrap();
        fs::write(
            wt.join(".git"),
            format!("gitdir: {}\n", repo.join(".git/worktrees/t").display()),
        )
        .unwrap();
        let e = resolve_git(&fs::canonicalize(&wt).unwrap()).unwrap_err();
        assert_eq!(e.step, Step::ResolveGitMetadata);
        assert!(e.to_string().contains("linked worktree"), "{e}");
    }
}
