//! GitLog and GitDiff: read-only views of the repository's history and uncommitted changes
//! through libgit2 (no `git` process, no hooks). Changes inside `.git` or `.codebutler`
//! are never shown.

use std::sync::Arc;

use async_trait::async_trait;
use git2::{DiffOptions, Repository, Sort};
use schemars::JsonSchema;
use serde::Deserialize;

use super::path::{RepoRoot, private_dir_reason};
use crate::conversation::ToolSpec;
use crate::schema::parameters;
use crate::tool::{Tool, ToolError, parse_args};

const LOG_NAME: &str = "GitLog";
const DIFF_NAME: &str = "GitDiff";

/// Commits GitLog shows when `n` is not given.
pub const DEFAULT_LOG_COMMITS: usize = 10;
/// Most commits GitLog shows.
pub const MAX_LOG_COMMITS: usize = 50;
/// Most commits GitLog examines when following a path.
const MAX_LOG_SCAN: usize = 20_000;
/// Most lines of GitDiff output.
pub const MAX_DIFF_LINES: usize = 300;
/// Widest `+`/`-` bar of the diff stat.
const STAT_BAR_WIDTH: usize = 40;

fn git_failed(context: &str, e: &git2::Error) -> ToolError {
    ToolError::Failed(format!("{context}: {}", e.message()))
}

/// Opens the repository at exactly `root` (no search upwards).
fn open_repo(root: &RepoRoot) -> Result<Repository, ToolError> {
    Repository::open(root.root()).map_err(|e| {
        if e.code() == git2::ErrorCode::NotFound {
            ToolError::Failed("not a git repository".to_owned())
        } else {
            git_failed("cannot open the git repository", &e)
        }
    })
}

/// The optional path argument as a literal pathspec (`None` for the whole repository).
fn pathspec(root: &RepoRoot, path: Option<&str>) -> Result<Option<String>, ToolError> {
    match path {
        None => Ok(None),
        Some(p) => {
            let normalized = root.normalize(p)?;
            Ok((!normalized.is_empty()).then_some(normalized))
        }
    }
}

fn diff_options(spec: Option<&str>) -> DiffOptions {
    let mut opts = DiffOptions::new();
    if let Some(spec) = spec {
        opts.pathspec(spec).disable_pathspec_match(true);
    }
    opts
}

/// Whether a path of the repository lies in a private directory.
fn is_private(path: &std::path::Path) -> bool {
    path.components()
        .any(|c| private_dir_reason(&c.as_os_str().to_string_lossy()).is_some())
}

/// `YYYY-MM-DD` of a git time, in the time zone it was recorded in.
fn format_date(time: git2::Time) -> String {
    let local = time.seconds() + i64::from(time.offset_minutes()) * 60;
    let (y, m, d) = civil_from_days(local.div_euclid(86_400));
    format!("{y:04}-{m:02}-{d:02}")
}

/// Proleptic Gregorian date of a day count since 1970-01-01 (Howard Hinnant's algorithm).
fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

/// Recent commits, optionally only those touching a path.
#[derive(Debug, Clone)]
pub struct GitLog {
    root: Arc<RepoRoot>,
}

/// GitLog's arguments. The model has always been shown an explicit empty `required`.
#[derive(Deserialize, JsonSchema)]
#[schemars(extend("required" = []))]
struct LogArgs {
    /// Number of commits to show (default 10, max 50).
    #[schemars(range(min = 1, max = MAX_LOG_COMMITS))]
    n: Option<i64>,
    /// Only commits that change this file or directory, relative to the repository root.
    path: Option<String>,
}

impl GitLog {
    /// A GitLog of the repository at `root`.
    pub fn new(root: Arc<RepoRoot>) -> Self {
        Self { root }
    }
}

/// Whether `commit` changes `spec` compared with its first parent.
fn touches(repo: &Repository, commit: &git2::Commit<'_>, spec: &str) -> Result<bool, git2::Error> {
    let tree = commit.tree()?;
    let parent_tree = if commit.parent_count() > 0 {
        Some(commit.parent(0)?.tree()?)
    } else {
        None
    };
    let mut opts = diff_options(Some(spec));
    let diff = repo.diff_tree_to_tree(parent_tree.as_ref(), Some(&tree), Some(&mut opts))?;
    Ok(diff.deltas().len() > 0)
}

fn log(root: &RepoRoot, args: &LogArgs) -> Result<String, ToolError> {
    let n = match args.n {
        None => DEFAULT_LOG_COMMITS,
        Some(n) if n >= 1 => usize::try_from(n)
            .unwrap_or(MAX_LOG_COMMITS)
            .min(MAX_LOG_COMMITS),
        Some(n) => {
            return Err(ToolError::InvalidArguments {
                tool: LOG_NAME.to_owned(),
                reason: format!("n must be at least 1, got {n}"),
            });
        }
    };
    let spec = pathspec(root, args.path.as_deref())?;
    let repo = open_repo(root)?;
    if let Err(e) = repo.head() {
        return match e.code() {
            git2::ErrorCode::UnbornBranch | git2::ErrorCode::NotFound => {
                Ok("no commits yet".to_owned())
            }
            _ => Err(git_failed("cannot read HEAD", &e)),
        };
    }
    let fail = |e: git2::Error| git_failed("cannot walk the history", &e);
    let mut walk = repo.revwalk().map_err(fail)?;
    walk.set_sorting(Sort::TIME).map_err(fail)?;
    walk.push_head().map_err(fail)?;

    let mut lines = Vec::new();
    let mut scanned = 0usize;
    for oid in walk {
        let commit = repo.find_commit(oid.map_err(fail)?).map_err(fail)?;
        scanned += 1;
        if let Some(spec) = &spec {
            if !touches(&repo, &commit, spec).map_err(fail)? {
                if scanned >= MAX_LOG_SCAN {
                    lines.push(format!("[stopped after examining {MAX_LOG_SCAN} commits]"));
                    break;
                }
                continue;
            }
        }
        let id = commit.id().to_string();
        let author = commit.author();
        let summary = commit
            .summary_bytes()
            .map(|s| String::from_utf8_lossy(s).into_owned())
            .filter(|s| !s.trim().is_empty())
            .unwrap_or_else(|| "(no message)".to_owned());
        lines.push(format!(
            "{} {} {}: {}",
            id.get(..7).unwrap_or(&id),
            format_date(author.when()),
            String::from_utf8_lossy(author.name_bytes()),
            summary
        ));
        if lines.len() >= n {
            break;
        }
    }
    if lines.is_empty() {
        return Ok(match &spec {
            Some(spec) => format!("no commits touch {spec}"),
            None => "no commits yet".to_owned(),
        });
    }
    Ok(lines.join("\n"))
}

#[async_trait]
impl Tool for GitLog {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: LOG_NAME,
            description: "Show recent git commits. Returns hash, author, date, and message.",
            parameters: parameters::<LogArgs>(),
        }
    }

    fn read_only(&self) -> bool {
        true
    }

    async fn call(&self, args: serde_json::Value) -> Result<String, ToolError> {
        let args: LogArgs = parse_args(LOG_NAME, args)?;
        let root = Arc::clone(&self.root);
        crate::tool::run_blocking(LOG_NAME, move || log(&root, &args)).await
    }
}

/// Uncommitted changes, or the changes between a ref and the working tree.
#[derive(Debug, Clone)]
pub struct GitDiff {
    root: Arc<RepoRoot>,
}

/// GitDiff's arguments. The model has always been shown an explicit empty `required`.
#[derive(Deserialize, JsonSchema)]
#[schemars(extend("required" = []))]
struct DiffArgs {
    /// Commit, branch or tag to compare the working tree with (default: HEAD, i.e. uncommitted changes).
    #[serde(rename = "ref")]
    git_ref: Option<String>,
    /// Only changes to this file or directory, relative to the repository root.
    path: Option<String>,
}

impl GitDiff {
    /// A GitDiff of the repository at `root`.
    pub fn new(root: Arc<RepoRoot>) -> Self {
        Self { root }
    }
}

/// One changed file: its path, the lines added and removed, and its patch text.
struct FileChange {
    path: String,
    binary: bool,
    added: usize,
    removed: usize,
    patch: String,
}

fn stat_lines(changes: &[FileChange]) -> Vec<String> {
    let width = changes
        .iter()
        .map(|c| c.path.chars().count())
        .max()
        .unwrap_or(0);
    let most = changes
        .iter()
        .map(|c| c.added + c.removed)
        .max()
        .unwrap_or(0);
    let count_width = most.to_string().len();
    let mut lines: Vec<String> = changes
        .iter()
        .map(|c| {
            if c.binary {
                return format!(" {:<width$} | Bin", c.path);
            }
            let total = c.added + c.removed;
            let (plus, minus) = if most > STAT_BAR_WIDTH {
                let scale = |k: usize| {
                    if k == 0 {
                        0
                    } else {
                        (k * STAT_BAR_WIDTH / most).max(1)
                    }
                };
                (scale(c.added), scale(c.removed))
            } else {
                (c.added, c.removed)
            };
            format!(
                " {:<width$} | {total:>count_width$} {}{}",
                c.path,
                "+".repeat(plus),
                "-".repeat(minus)
            )
            .trim_end()
            .to_owned()
        })
        .collect();
    let files = changes.len();
    let added: usize = changes.iter().map(|c| c.added).sum();
    let removed: usize = changes.iter().map(|c| c.removed).sum();
    let plural = |k: usize, one: &str, many: &str| {
        if k == 1 {
            format!("{k} {one}")
        } else {
            format!("{k} {many}")
        }
    };
    lines.push(format!(
        " {}, {}(+), {}(-)",
        plural(files, "file changed", "files changed"),
        plural(added, "insertion", "insertions"),
        plural(removed, "deletion", "deletions")
    ));
    lines
}

fn diff(root: &RepoRoot, args: &DiffArgs) -> Result<String, ToolError> {
    let spec = pathspec(root, args.path.as_deref())?;
    let repo = open_repo(root)?;
    let base = match &args.git_ref {
        Some(r) => {
            let object = repo.revparse_single(r).map_err(|e| {
                ToolError::NotFound(format!("unknown git revision {r:?}: {}", e.message()))
            })?;
            let tree = object
                .peel_to_tree()
                .map_err(|e| ToolError::InvalidArguments {
                    tool: DIFF_NAME.to_owned(),
                    reason: format!("{r:?} does not name a commit or tree: {}", e.message()),
                })?;
            Some(tree)
        }
        None => match repo.head() {
            Ok(head) => Some(
                head.peel_to_tree()
                    .map_err(|e| git_failed("cannot read HEAD", &e))?,
            ),
            Err(e)
                if matches!(
                    e.code(),
                    git2::ErrorCode::UnbornBranch | git2::ErrorCode::NotFound
                ) =>
            {
                None
            }
            Err(e) => return Err(git_failed("cannot read HEAD", &e)),
        },
    };
    let fail = |e: git2::Error| git_failed("cannot compute the diff", &e);
    let mut opts = diff_options(spec.as_deref());
    let diff = repo
        .diff_tree_to_workdir_with_index(base.as_ref(), Some(&mut opts))
        .map_err(fail)?;

    let mut changes = Vec::new();
    for (idx, delta) in diff.deltas().enumerate() {
        let Some(path) = delta.new_file().path().or_else(|| delta.old_file().path()) else {
            continue;
        };
        if is_private(path) {
            continue;
        }
        let path = path.to_string_lossy().replace('\\', "/");
        let Some(mut patch) = git2::Patch::from_diff(&diff, idx).map_err(fail)? else {
            continue;
        };
        let (_, added, removed) = patch.line_stats().map_err(fail)?;
        let text = patch.to_buf().map_err(fail)?;
        changes.push(FileChange {
            path,
            binary: delta.new_file().is_binary() || delta.old_file().is_binary(),
            added,
            removed,
            patch: String::from_utf8_lossy(&text).into_owned(),
        });
    }
    if changes.is_empty() {
        return Ok(match &args.git_ref {
            Some(r) => format!("no changes between {r} and the working tree"),
            None => "no uncommitted changes".to_owned(),
        });
    }

    let mut lines = stat_lines(&changes);
    lines.push(String::new());
    for change in &changes {
        lines.extend(change.patch.lines().map(str::to_owned));
    }
    if lines.len() > MAX_DIFF_LINES {
        let total = lines.len();
        lines.truncate(MAX_DIFF_LINES);
        lines.push(format!(
            "[diff cut at {MAX_DIFF_LINES} of {total} lines; pass path to see one file]"
        ));
    }
    Ok(lines.join("\n"))
}

#[async_trait]
impl Tool for GitDiff {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: DIFF_NAME,
            description: "Show git diff (stat format) of uncommitted changes, or between a ref and the working tree.",
            parameters: parameters::<DiffArgs>(),
        }
    }

    fn read_only(&self) -> bool {
        true
    }

    async fn call(&self, args: serde_json::Value) -> Result<String, ToolError> {
        let args: DiffArgs = parse_args(DIFF_NAME, args)?;
        let root = Arc::clone(&self.root);
        crate::tool::run_blocking(DIFF_NAME, move || diff(&root, &args)).await
    }
}

#[cfg(test)]
mod tests {
    use super::super::path::test_support::{commit_all, repo_with, write_files};
    use super::*;
    use serde_json::json;

    const DAY: i64 = 86_400;
    /// 2026-01-02 00:00 UTC, the time of `repo_with`'s initial commit.
    const T0: i64 = 1_767_312_000;

    async fn log_of(root: &Arc<RepoRoot>, args: serde_json::Value) -> Result<String, ToolError> {
        GitLog::new(Arc::clone(root)).call(args).await
    }

    async fn diff_of(root: &Arc<RepoRoot>, args: serde_json::Value) -> Result<String, ToolError> {
        GitDiff::new(Arc::clone(root)).call(args).await
    }

    /// A repository with three commits: initial, "touch src", "touch docs".
    fn history() -> (tempfile::TempDir, Arc<RepoRoot>) {
        let (dir, root) = repo_with(&[("src/a.rs", "a\n"), ("docs/d.md", "d\n")]);
        write_files(dir.path(), &[("src/a.rs", "a2\n")]);
        commit_all(dir.path(), "touch src\n\nwith a body", T0 + DAY);
        write_files(dir.path(), &[("docs/d.md", "d2\n")]);
        commit_all(dir.path(), "touch docs", T0 + 2 * DAY);
        (dir, root)
    }

    fn short_ids(out: &str) -> Vec<&str> {
        out.lines().filter_map(|l| l.split(' ').next()).collect()
    }

    #[test]
    fn dates_are_civil() {
        assert_eq!(format_date(git2::Time::new(0, 0)), "1970-01-01");
        assert_eq!(format_date(git2::Time::new(T0, 0)), "2026-01-02");
        assert_eq!(format_date(git2::Time::new(T0 - 1, 0)), "2026-01-01");
        assert_eq!(format_date(git2::Time::new(T0 - 60, 120)), "2026-01-02");
        assert_eq!(format_date(git2::Time::new(951_782_400, 0)), "2000-02-29");
    }

    #[tokio::test]
    async fn log_lists_recent_commits() {
        let (dir, root) = history();
        let repo = Repository::open(dir.path()).unwrap();
        let head = repo.head().unwrap().target().unwrap().to_string();
        let out = log_of(&root, json!({})).await.unwrap();
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines.len(), 3);
        assert_eq!(
            lines[0],
            format!("{} 2026-01-04 Ada Lovelace: touch docs", &head[..7])
        );
        assert!(
            lines[1].ends_with(" 2026-01-03 Ada Lovelace: touch src"),
            "{}",
            lines[1]
        );
        assert!(
            lines[2].ends_with(" 2026-01-02 Ada Lovelace: initial"),
            "{}",
            lines[2]
        );
        let two = log_of(&root, json!({"n": 2})).await.unwrap();
        assert_eq!(two.lines().count(), 2);
        let err = log_of(&root, json!({"n": 0})).await.unwrap_err();
        assert!(matches!(err, ToolError::InvalidArguments { .. }), "{err}");
    }

    #[tokio::test]
    async fn log_is_capped_at_50() {
        let (dir, root) = repo_with(&[("f", "0")]);
        for i in 1..=55 {
            write_files(dir.path(), &[("f", &i.to_string())]);
            commit_all(dir.path(), &format!("c{i}"), T0 + i * 60);
        }
        let out = log_of(&root, json!({"n": 500})).await.unwrap();
        assert_eq!(out.lines().count(), MAX_LOG_COMMITS);
        assert!(out.lines().next().unwrap().ends_with(": c55"), "{out}");
        assert_eq!(log_of(&root, json!({})).await.unwrap().lines().count(), 10);
    }

    #[tokio::test]
    async fn log_follows_a_path() {
        let (_dir, root) = history();
        let src = log_of(&root, json!({"path": "src"})).await.unwrap();
        let summaries: Vec<&str> = src
            .lines()
            .map(|l| l.rsplit(": ").next().unwrap())
            .collect();
        assert_eq!(summaries, vec!["touch src", "initial"]);
        let file = log_of(&root, json!({"path": "docs/d.md"})).await.unwrap();
        assert!(
            file.lines().next().unwrap().ends_with(": touch docs"),
            "{file}"
        );
        assert_eq!(file.lines().count(), 2);
        assert_eq!(short_ids(&file).len(), 2);
        assert_eq!(
            log_of(&root, json!({"path": "gone.txt"})).await.unwrap(),
            "no commits touch gone.txt"
        );
        let err = log_of(&root, json!({"path": "../x"})).await.unwrap_err();
        assert!(matches!(err, ToolError::PathRefused { .. }), "{err}");
        let err = log_of(&root, json!({"path": ".codebutler"}))
            .await
            .unwrap_err();
        assert!(matches!(err, ToolError::PathRefused { .. }), "{err}");
    }

    #[tokio::test]
    async fn not_a_repository_and_empty_repository() {
        let dir = tempfile::tempdir().unwrap();
        let root = Arc::new(RepoRoot::new(dir.path()).unwrap());
        let err = log_of(&root, json!({})).await.unwrap_err();
        assert_eq!(err.to_string(), "not a git repository");
        let err = diff_of(&root, json!({})).await.unwrap_err();
        assert_eq!(err.to_string(), "not a git repository");
        git2::Repository::init(dir.path()).unwrap();
        assert_eq!(log_of(&root, json!({})).await.unwrap(), "no commits yet");
    }

    #[tokio::test]
    async fn diff_shows_uncommitted_changes() {
        let (dir, root) = history();
        assert_eq!(
            diff_of(&root, json!({})).await.unwrap(),
            "no uncommitted changes"
        );
        write_files(
            dir.path(),
            &[
                ("src/a.rs", "a3\nmore\n"),
                (".codebutler/config.json", "{\"secret\":1}"),
            ],
        );
        std::fs::remove_file(dir.path().join("docs/d.md")).unwrap();
        let out = diff_of(&root, json!({})).await.unwrap();
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines[0], " docs/d.md | 1 -");
        assert_eq!(lines[1], " src/a.rs  | 3 ++-");
        assert_eq!(
            lines[2],
            " 2 files changed, 2 insertions(+), 2 deletions(-)"
        );
        assert_eq!(lines[3], "");
        assert!(out.contains("diff --git a/src/a.rs b/src/a.rs"), "{out}");
        assert!(out.contains("\n-a2\n+a3\n+more"), "{out}");
        assert!(out.contains("\n-d2"), "{out}");
        assert!(!out.contains("secret"), "{out}");

        let only = diff_of(&root, json!({"path": "src"})).await.unwrap();
        assert!(
            only.starts_with(" src/a.rs | 3 ++-\n 1 file changed"),
            "{only}"
        );
        assert!(!only.contains("docs"), "{only}");
    }

    #[tokio::test]
    async fn diff_against_a_ref() {
        let (dir, root) = history();
        let first = {
            let repo = Repository::open(dir.path()).unwrap();
            let head = repo.head().unwrap().peel_to_commit().unwrap();
            head.parent(0).unwrap().parent(0).unwrap().id().to_string()
        };
        let out = diff_of(&root, json!({"ref": "HEAD~1"})).await.unwrap();
        assert!(
            out.starts_with(" docs/d.md | 2 +-\n 1 file changed, 1 insertion(+), 1 deletion(-)"),
            "{out}"
        );
        let out = diff_of(&root, json!({"ref": &first[..10]})).await.unwrap();
        assert!(out.contains(" 2 files changed"), "{out}");
        assert!(out.contains("+a2") && out.contains("+d2"), "{out}");
        assert_eq!(
            diff_of(&root, json!({"ref": "HEAD"})).await.unwrap(),
            "no changes between HEAD and the working tree"
        );
        let err = diff_of(&root, json!({"ref": "no-such-branch"}))
            .await
            .unwrap_err();
        assert!(matches!(err, ToolError::NotFound(_)), "{err}");
        assert!(
            err.to_string()
                .starts_with("unknown git revision \"no-such-branch\""),
            "{err}"
        );
    }

    #[tokio::test]
    async fn diff_is_capped() {
        let body: String = (0..400).map(|i| format!("{i}\n")).collect();
        let (dir, root) = repo_with(&[("big.txt", "x\n")]);
        write_files(dir.path(), &[("big.txt", &body)]);
        let out = diff_of(&root, json!({})).await.unwrap();
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines.len(), MAX_DIFF_LINES + 1);
        assert!(lines[0].starts_with(" big.txt | 401 +++"), "{}", lines[0]);
        assert!(
            lines[MAX_DIFF_LINES].starts_with("[diff cut at 300 of "),
            "{}",
            lines[MAX_DIFF_LINES]
        );
    }
}
