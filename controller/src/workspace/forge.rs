//! Commits, pushes and pull requests made by the controller for a run.
//!
//! The runner's git metadata is read-only inside its sandbox, so the controller commits and
//! pushes for it, and it must never execute anything the runner wrote:
//!
//! - a commit's files come from the sandboxed worktree helper ([`super::stage`]), never from
//!   the controller reading the worktree, and every process of the run but the runner
//!   itself is gone by then (its GitCommit tool ends them first);
//! - what the worktree's preparation left and build by-products stay out of a commit unless
//!   the Coder names them in its `include` ([`super::prepared`], [`super::byproducts`]); the
//!   commit says what it left out;
//! - commits are made with git2 (libgit2 runs no hooks and no filter programs) in the
//!   thread's own repository ([`super::thread_repo`]), only on a `codebutler/` branch, with a
//!   fixed bot identity that no repository config can change, then copied to the main
//!   repository; while a merge of the default branch waits for its conflicts to be resolved
//!   ([`super::update_branch`]), the commit is that merge (the default branch's head its
//!   second parent) and is refused while conflict markers remain;
//! - pushes run `git push` as a process in the main repository (so the person's remote and
//!   credential helpers work) with a fixed argument list: hooks disabled with
//!   `-c core.hooksPath=/dev/null`, the `ext::` transport refused, never `--force`, only
//!   `refs/heads/codebutler/<slug>` to `origin`;
//! - pull requests run `gh pr create` in the main repository with fixed arguments, the body
//!   on stdin; neither `git` nor `gh` ever runs in a worktree;
//! - the PR template is read from the default branch's commit the branch started from,
//!   never from the worktree's files or the run's own commits, and never through a link,
//!   so a symlink cannot make the controller publish a file from outside the repository.
//!
//! The PR body itself is plain data ([`pr_body`]) and tested by equality.

use std::path::Path;
use std::time::Duration;

use tokio::process::Command;

use super::gh_cli::GhArgs;
use super::git_command::{CommandError, quote, run, safe_git};
use super::prepared::{self, IncludeError, LeftOut, Prepared};
use super::stage::{self, Helper};
use super::step_error::{GitStepError, git};
use super::thread_repo::{self, BOT_EMAIL, BOT_NAME, BRANCH_PREFIX, MAX_COMMIT_FILE_BYTES};
use super::update_branch;
use crate::repo_files;

/// Longest a push may take.
pub const PUSH_TIMEOUT: Duration = Duration::from_secs(120);
/// Longest `gh pr create` may take.
pub const GH_TIMEOUT: Duration = Duration::from_secs(120);
/// Where a repository's PR template is looked for, first found wins
/// (`change-request-workflow.md` §3).
pub const TEMPLATE_PATHS: [&str; 6] = [
    ".github/PULL_REQUEST_TEMPLATE.md",
    ".github/pull_request_template.md",
    "docs/PULL_REQUEST_TEMPLATE.md",
    "docs/pull_request_template.md",
    "PULL_REQUEST_TEMPLATE.md",
    "pull_request_template.md",
];
/// Largest template used; a bigger file is ignored.
const MAX_TEMPLATE_BYTES: u64 = 64 * 1024;
/// Most commit subjects listed in the fallback body.
const MAX_LISTED_COMMITS: usize = 50;

/// Why a commit, push or pull request failed.
#[derive(Debug, thiserror::Error)]
pub enum ForgeError {
    #[error("the commit message is empty")]
    EmptyMessage,
    #[error("the pull request title is empty")]
    EmptyTitle,
    #[error("refusing to commit or push {branch:?}: only {BRANCH_PREFIX} branches are allowed")]
    NotOurBranch { branch: String },
    #[error(transparent)]
    Git(#[from] GitStepError),
    #[error(transparent)]
    Command(#[from] CommandError),
    #[error("gh printed no pull request address; its output: {output:?}")]
    NoUrl { output: String },
    #[error("{0}")]
    Thread(#[from] super::thread_repo::ThreadRepoError),
    #[error(transparent)]
    Include(#[from] IncludeError),
    #[error("read the worktree's files: {0}")]
    Stage(#[from] super::stage::StageError),
    #[error(
        "conflict markers are still in {}: resolve them, then commit again",
        .0.join(", ")
    )]
    MarkersLeft(Vec<String>),
    #[error("finish the merge of the default branch: {0}")]
    Merge(#[from] update_branch::UpdateError),
    #[error(
        "{} larger than GitHub accepts ({} MB): {}; add them to .gitignore or remove them, then commit again",
        if .0.len() == 1 { "a file is" } else { "files are" },
        MAX_COMMIT_FILE_BYTES >> 20,
        .0.join(", ")
    )]
    TooLarge(Vec<String>),
}

impl ForgeError {
    /// Whether the request itself cannot succeed as it stands (as opposed to the push or
    /// `gh` failing, which may work later).
    pub fn is_precondition(&self) -> bool {
        match self {
            Self::EmptyMessage
            | Self::EmptyTitle
            | Self::NotOurBranch { .. }
            | Self::Git { .. }
            | Self::Thread(_)
            | Self::Include(_)
            | Self::Merge(_)
            | Self::MarkersLeft(_)
            | Self::TooLarge(_) => true,
            Self::Command(_) | Self::NoUrl { .. } | Self::Stage(_) => false,
        }
    }
}

/// A commit made by [`commit_all`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Commit {
    /// The new commit's full hex id; empty when nothing was committed.
    pub sha: String,
    /// Paths added, changed or deleted, sorted.
    pub files_changed: Vec<String>,
    /// The worktree had no change, so no commit was made.
    pub nothing_to_commit: bool,
    /// What the commit left out: what the worktree's preparation left, build by-products.
    pub left_out: Vec<LeftOut>,
}

impl Commit {
    /// No commit: the files were as asked already.
    pub fn nothing() -> Self {
        Self {
            sha: String::new(),
            files_changed: Vec::new(),
            nothing_to_commit: true,
            left_out: Vec::new(),
        }
    }
}

/// A pull request opened by [`open_pr`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PullRequest {
    /// Its web address.
    pub url: String,
    /// Its number.
    pub number: u64,
}

/// The Slack web link of a thread: `https://slack.com/archives/<channel>/p<ts without dot>`.
pub fn thread_link(channel: &str, ts: &str) -> String {
    format!(
        "https://slack.com/archives/{channel}/p{}",
        ts.replace('.', "")
    )
}

/// Refuses a branch that is not one of ours or not a valid branch name.
pub(crate) fn check_branch(branch: &str) -> Result<(), ForgeError> {
    if thread_repo::is_our_branch(branch) {
        Ok(())
    } else {
        Err(ForgeError::NotOurBranch {
            branch: branch.to_owned(),
        })
    }
}

/// The branch the worktree's HEAD is on, if it is one of ours. Blocking (git2).
pub fn worktree_branch(worktree: &Path) -> Result<String, ForgeError> {
    head_branch(&thread_repo::open(worktree)?)
}

fn head_branch(repo: &git2::Repository) -> Result<String, ForgeError> {
    let head = repo.head().map_err(git("read HEAD"))?;
    let name = head.name().unwrap_or_default();
    let branch = name.strip_prefix("refs/heads/").unwrap_or(name);
    if !head.is_branch() {
        return Err(ForgeError::NotOurBranch {
            branch: branch.to_owned(),
        });
    }
    check_branch(branch)?;
    Ok(branch.to_owned())
}

/// Stages every change of the worktree (added, modified and deleted files; ignored files and
/// anything under `.git` stay out; read by the sandboxed `helper`) and commits it on the
/// worktree's current branch as CodeButler, then copies the branch to the main repository
/// `main`. What the worktree's preparation left, still as it left it, stays out too
/// ([`prepared::select`]), and the build by-products git ignores are named as left out;
/// the paths of `include` (GitCommit's) are committed as they are in the worktree whatever
/// leaves them out. Refuses unless HEAD is on a `codebutler/` branch, files over
/// [`MAX_COMMIT_FILE_BYTES`], and an `include` that names nothing there. Blocking (git2):
/// call it from `spawn_blocking`.
pub fn commit_all(
    helper: &Helper,
    main: &Path,
    worktree: &Path,
    message: &str,
    include: &[String],
) -> Result<Commit, ForgeError> {
    if message.trim().is_empty() {
        return Err(ForgeError::EmptyMessage);
    }
    let include = prepared::include_paths(include)?;
    let repo = thread_repo::open(worktree)?;
    let branch = head_branch(&repo)?;
    let parent = repo
        .head()
        .and_then(|h| h.peel_to_commit())
        .map_err(git("read the branch's last commit"))?;
    let parent_tree = parent.tree().map_err(git("read the parent tree"))?;
    let record = Prepared::read(&repo).map_err(git("read the preparation's record"))?;
    let files = stage::snapshot_for_commit(helper, &repo, MAX_COMMIT_FILE_BYTES, &include)?;
    prepared::check_include(&files.files, &parent_tree, &record, &include)?;
    if !files.skipped.is_empty() {
        return Err(ForgeError::TooLarge(
            files
                .skipped
                .iter()
                .map(|(path, size)| format!("{path} ({} MB)", size >> 20))
                .collect(),
        ));
    }
    let selection = prepared::select(files.files, &files.ignored, &parent_tree, &record, &include);
    let tree_id = stage::write_index(&repo, &selection.files)?;
    // A merge of the default branch whose conflicts this commit resolves: its second parent.
    let merging = update_branch::merge_in_progress(&repo, parent.id())?
        .map(|id| repo.find_commit(id))
        .transpose()
        .map_err(git("read the commit being merged"))?;
    if tree_id == parent.tree_id() && merging.is_none() {
        return Ok(Commit {
            left_out: selection.left_out,
            ..Commit::nothing()
        });
    }
    if merging.is_some() {
        let left = update_branch::markers_left(&repo, parent.tree_id(), tree_id)?;
        if !left.is_empty() {
            return Err(ForgeError::MarkersLeft(left));
        }
    }
    let tree = repo.find_tree(tree_id).map_err(git("read the new tree"))?;
    let diff = repo
        .diff_tree_to_tree(Some(&parent_tree), Some(&tree), None)
        .map_err(git("diff the commit"))?;
    let mut files_changed: Vec<String> = diff
        .deltas()
        .filter_map(|d| d.new_file().path().or_else(|| d.old_file().path()))
        .map(|p| p.to_string_lossy().into_owned())
        .collect();
    files_changed.sort();
    files_changed.dedup();
    let mut parents = vec![&parent];
    parents.extend(merging.as_ref());
    let commit = commit_as_bot(
        main,
        &repo,
        &branch,
        &parents,
        &tree,
        message,
        files_changed,
    )?;
    if let Some(theirs) = &merging {
        update_branch::merge_committed(&repo, theirs.id())?;
    }
    Ok(Commit {
        left_out: selection.left_out,
        ..commit
    })
}

/// Commits `tree` on top of `parents` (the branch's head first) as the thread branch's new
/// head (the thread repository's `HEAD` is on `branch`), as the bot ([`BOT_NAME`]), and
/// mirrors the branch to the main repository `main`.
pub(super) fn commit_as_bot(
    main: &Path,
    repo: &git2::Repository,
    branch: &str,
    parents: &[&git2::Commit<'_>],
    tree: &git2::Tree<'_>,
    message: &str,
    files_changed: Vec<String>,
) -> Result<Commit, ForgeError> {
    let signature = git2::Signature::now(BOT_NAME, BOT_EMAIL).map_err(git("make the signature"))?;
    let oid = repo
        .commit(Some("HEAD"), &signature, &signature, message, tree, parents)
        .map_err(git("commit"))?;
    thread_repo::mirror(main, repo, branch)?;
    Ok(Commit {
        sha: oid.to_string(),
        files_changed,
        nothing_to_commit: false,
        left_out: Vec::new(),
    })
}

/// Pushes `branch` (a `codebutler/` branch, already copied there by [`commit_all`]) from the
/// main repository `main` to `origin` ([`push_to_origin`]), then records the push in the
/// thread repository of `worktree`.
pub async fn push_branch(main: &Path, worktree: &Path, branch: &str) -> Result<(), ForgeError> {
    push_to_origin(main, branch).await?;
    let (tree, name) = (worktree.to_owned(), branch.to_owned());
    tokio::task::spawn_blocking(move || {
        let repo = thread_repo::open(&tree)?;
        let tip = repo
            .refname_to_id(&format!("refs/heads/{name}"))
            .map_err(git(format!("read {name}")))?;
        thread_repo::set_pushed(&repo, &name, tip)?;
        Ok::<_, ForgeError>(())
    })
    .await
    .map_err(|e| {
        ForgeError::Command(CommandError::Failed {
            what: "record the push".into(),
            status: "the task failed".into(),
            output: e.to_string(),
        })
    })??;
    Ok(())
}

/// Pushes the main repository `main`'s `branch` (a `codebutler/` one only) to `origin`: `git
/// -c core.hooksPath=/dev/null -c protocol.ext.allow=never … push origin
/// refs/heads/<branch>:refs/heads/<branch>`, without force, without a terminal prompt, within
/// [`PUSH_TIMEOUT`].
pub async fn push_to_origin(main: &Path, branch: &str) -> Result<(), ForgeError> {
    check_branch(branch)?;
    let refspec = format!("refs/heads/{branch}:refs/heads/{branch}");
    let mut command = safe_git(main);
    command.args(["push", "origin", &refspec]);
    run(command, None, "git push", PUSH_TIMEOUT).await?;
    Ok(())
}

/// Opens a pull request for `branch` with `gh pr create --head <branch> --title <title>
/// --body-file -` (the body on stdin), run in the main repository `main` within
/// [`GH_TIMEOUT`]; returns the address `gh` printed and the number at its end. When the
/// branch has an open pull request already, `gh` refuses and names it: that one is returned.
pub async fn open_pr(
    gh: &Path,
    main: &Path,
    branch: &str,
    title: &str,
    body: &str,
) -> Result<PullRequest, ForgeError> {
    check_branch(branch)?;
    let title = title.trim();
    if title.is_empty() {
        return Err(ForgeError::EmptyTitle);
    }
    let mut command = Command::new(gh);
    command
        .args(GhArgs::PrCreate { branch, title }.to_args())
        .current_dir(main)
        .env("GIT_TERMINAL_PROMPT", "0")
        .env("GH_PROMPT_DISABLED", "1");
    let output = match run(command, Some(body.as_bytes()), "gh pr create", GH_TIMEOUT).await {
        Ok(output) => output,
        // Opened already (a retry after a crash or a lost answer): gh names the open one.
        Err(CommandError::Failed { output, .. })
            if output.contains("already exists") && parse_pr_url(&output).is_some() =>
        {
            tracing::info!("gh pr create: the pull request of {branch} exists already");
            output
        }
        Err(e) => return Err(e.into()),
    };
    parse_pr_url(&output).ok_or(ForgeError::NoUrl {
        output: quote(&output),
    })
}

/// The last line of `gh`'s output that is an address, and the number at its end.
fn parse_pr_url(output: &str) -> Option<PullRequest> {
    let url = output
        .lines()
        .map(str::trim)
        .rfind(|l| l.starts_with("http://") || l.starts_with("https://"))?;
    let number = url.trim_end_matches('/').rsplit('/').next()?.parse().ok()?;
    Some(PullRequest {
        url: url.to_owned(),
        number,
    })
}

/// What the PR body is built from, read from the branch's commits.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PrContext {
    /// The repository's PR template as committed on the branch, if it has one.
    pub template: Option<String>,
    /// Subjects of the branch's commits since its base, oldest first.
    pub commits: Vec<String>,
}

/// Reads the PR template (the first of [`TEMPLATE_PATHS`] that is a regular file in the
/// commit of the default branch the branch started from, so a run cannot rewrite the
/// template its own pull request is held to) and the branch's commit subjects. Blocking
/// (git2).
pub fn pr_context(worktree: &Path) -> Result<PrContext, ForgeError> {
    let repo = thread_repo::open(worktree)?;
    let head = repo
        .head()
        .and_then(|h| h.peel_to_commit())
        .map_err(git("read the branch's last commit"))?;
    // Where the branch started: the default branch's commit.
    let base = thread_repo::base_of(&repo)?;
    let template = TEMPLATE_PATHS.iter().find_map(|path| {
        // Regular files only: a link's blob is its target, not a template.
        match repo_files::committed(&repo, base, path, MAX_TEMPLATE_BYTES) {
            Ok(repo_files::Found::File(bytes)) => String::from_utf8(bytes)
                .ok()
                .filter(|t| !t.trim().is_empty()),
            Ok(_) => None,
            Err(e) => {
                tracing::warn!("the PR template at {path}: {e}");
                None
            }
        }
    });
    let mut walk = repo.revwalk().map_err(git("walk the branch"))?;
    walk.push(head.id()).map_err(git("walk the branch"))?;
    walk.hide(base).map_err(git("walk the branch"))?;
    let mut commits: Vec<String> = walk
        .take(MAX_LISTED_COMMITS)
        .filter_map(Result::ok)
        .filter_map(|id| repo.find_commit(id).ok())
        .map(|c| String::from_utf8_lossy(c.summary_bytes().unwrap_or_default()).into_owned())
        .collect();
    commits.reverse();
    Ok(PrContext { template, commits })
}

/// The pull request's body: the model's description, then the repository's template when it
/// has one — else a built-in Summary/Changes layout listing the branch's commits — and,
/// for runs from Slack, a last line linking the thread.
pub fn pr_body(context: &PrContext, model_body: &str, thread_link: Option<&str>) -> String {
    let description = model_body.trim();
    let mut body = match &context.template {
        Some(template) => {
            let mut text = String::new();
            if !description.is_empty() {
                text.push_str(description);
                text.push_str("\n\n");
            }
            text.push_str(template.trim());
            text.push('\n');
            text
        }
        None => {
            let summary = if description.is_empty() {
                "(no description)"
            } else {
                description
            };
            let mut text = format!("## Summary\n\n{summary}\n\n## Changes\n\n");
            if context.commits.is_empty() {
                text.push_str("- (no commits)\n");
            }
            for subject in &context.commits {
                text.push_str(&format!("- {subject}\n"));
            }
            text
        }
    };
    if let Some(link) = thread_link {
        body.push_str(&format!(
            "\n---\nRequested in Slack by CodeButler: {link}\n"
        ));
    }
    body
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::workspace::stage::test_support::ThreadFixture;

    fn main_repo(f: &ThreadFixture) -> git2::Repository {
        git2::Repository::open(f.main()).unwrap()
    }

    fn commit_in(f: &ThreadFixture, message: &str) -> Result<Commit, ForgeError> {
        commit_all(&f.helper(), f.main(), f.worktree(), message, &[])
    }

    #[tokio::test]
    async fn a_pull_request_opened_already_is_the_one_returned_on_a_retry() {
        let f = ThreadFixture::new(&[("a.txt", "a\n")]);
        let bare = with_bare_origin(&f);
        let main_ref = main_repo(&f).head().unwrap().name().unwrap().to_owned();
        codebutler_test_support::git::git(f.main(), &["push", "-q", "origin", &main_ref]);
        bare.set_head(&main_ref).unwrap();
        std::fs::write(f.worktree().join("a.txt"), "b\n").unwrap();
        commit_in(&f, "Change a").unwrap();
        push_branch(f.main(), f.worktree(), "codebutler/t")
            .await
            .unwrap();
        let gh = codebutler_test_support::gh::install_fake_gh(&f.dir.path().join("bin"));
        let open = || open_pr(&gh, f.main(), "codebutler/t", "T", "body");
        let first = open().await.unwrap();
        // gh refuses a second pull request for the branch and names the open one.
        assert_eq!(open().await.unwrap(), first);
        assert_eq!(first.number, 7);
    }

    #[test]
    fn commits_every_change_on_the_codebutler_branch_only() {
        let f = ThreadFixture::new(&[
            ("README.md", "hello\n"),
            ("old.txt", "old\n"),
            (".gitignore", "target/\n"),
        ]);
        let wt = f.worktree();
        let main_before = main_repo(&f).head().unwrap().target().unwrap();
        std::fs::write(wt.join("README.md"), "hello, world\n").unwrap();
        std::fs::remove_file(wt.join("old.txt")).unwrap();
        std::fs::create_dir_all(wt.join("src")).unwrap();
        std::fs::write(wt.join("src/new.rs"), "fn main() {}\n").unwrap();
        std::fs::create_dir_all(wt.join("target")).unwrap();
        std::fs::write(wt.join("target/out"), "ignored").unwrap();

        let commit = commit_in(&f, "Say hello to the world\n\nDetails.").unwrap();
        assert!(!commit.nothing_to_commit);
        assert_eq!(commit.files_changed, ["README.md", "old.txt", "src/new.rs"]);

        // The commit is on the thread's branch and copied to the main repository, whose
        // checkout did not move.
        let repo = main_repo(&f);
        assert_eq!(repo.head().unwrap().target().unwrap(), main_before);
        assert_eq!(
            thread_repo::open(wt)
                .unwrap()
                .refname_to_id("refs/heads/codebutler/t")
                .unwrap()
                .to_string(),
            commit.sha
        );
        let branch = repo
            .find_branch("codebutler/t", git2::BranchType::Local)
            .unwrap();
        let made = branch.get().peel_to_commit().unwrap();
        assert_eq!(made.id().to_string(), commit.sha);
        assert_eq!(
            made.message().ok(),
            Some("Say hello to the world\n\nDetails.")
        );
        assert_eq!(made.author().name().ok(), Some(BOT_NAME));
        assert_eq!(made.author().email().ok(), Some(BOT_EMAIL));
        assert_eq!(made.committer().email().ok(), Some(BOT_EMAIL));
        let tree = made.tree().unwrap();
        assert!(tree.get_path(Path::new("src/new.rs")).is_ok());
        assert!(tree.get_path(Path::new("old.txt")).is_err());
        assert!(tree.get_path(Path::new("target/out")).is_err());

        // The index matches: git in the worktree sees a clean tree but the ignored file.
        assert_eq!(f.git_status(), "");
        let again = commit_in(&f, "again").unwrap();
        assert_eq!(
            again,
            Commit {
                sha: String::new(),
                files_changed: vec![],
                nothing_to_commit: true,
                left_out: vec![],
            }
        );
    }

    #[test]
    fn the_shared_files_directory_is_never_committed_even_where_a_gitignore_unignores_it() {
        let f = ThreadFixture::new(&[("a.txt", "a\n")]);
        let wt = f.worktree();
        // What a run without shared files could leave where a later run sees them, beside a
        // .gitignore that un-ignores the directory.
        std::fs::create_dir_all(wt.join(".codebutler-attachments/sub")).unwrap();
        std::fs::write(wt.join(".codebutler-attachments/notes.txt"), "planted\n").unwrap();
        std::fs::write(wt.join(".codebutler-attachments/sub/x.log"), "planted\n").unwrap();
        std::fs::write(wt.join(".gitignore"), "!.codebutler-attachments/\n").unwrap();
        std::fs::write(wt.join("a.txt"), "b\n").unwrap();
        let commit = commit_in(&f, "Change a").unwrap();
        assert_eq!(commit.files_changed, [".gitignore", "a.txt"]);
        let repo = main_repo(&f);
        let made = repo
            .find_commit(git2::Oid::from_str(&commit.sha).unwrap())
            .unwrap();
        let tree = made.tree().unwrap();
        assert!(tree.get_path(Path::new(".codebutler-attachments")).is_err());
        assert!(tree.get_path(Path::new("a.txt")).is_ok());
        // Naming it on purpose is refused, with the reason.
        let err = commit_all(
            &f.helper(),
            f.main(),
            wt,
            "Add the notes",
            &[".codebutler-attachments/notes.txt".to_owned()],
        )
        .unwrap_err();
        assert!(
            err.to_string()
                .contains("the files people shared in the thread are never committed"),
            "{err}"
        );
    }

    #[test]
    fn refuses_other_branches_and_empty_messages() {
        let f = ThreadFixture::new(&[("a.txt", "a\n")]);
        assert!(matches!(
            commit_in(&f, "  \n"),
            Err(ForgeError::EmptyMessage)
        ));
        // The main checkout is on `main`.
        let main = f.main();
        std::fs::write(main.join("a.txt"), "changed\n").unwrap();
        let err = commit_all(&f.helper(), main, main, "change", &[]).unwrap_err();
        assert!(matches!(err, ForgeError::NotOurBranch { .. }), "{err}");
        assert_eq!(
            err.to_string(),
            "refusing to commit or push \"main\": only codebutler/ branches are allowed"
        );
        assert!(err.is_precondition());
        assert_eq!(worktree_branch(f.worktree()).unwrap(), "codebutler/t");
        for bad in [
            "main",
            "codebutler/",
            "codebutler/a..b",
            "codebutler/x:y",
            "-f",
        ] {
            assert!(check_branch(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn thread_links_point_at_the_slack_thread() {
        assert_eq!(
            thread_link("C0123", "1712345678.000200"),
            "https://slack.com/archives/C0123/p1712345678000200"
        );
    }

    #[test]
    fn body_without_a_template_has_summary_and_changes() {
        let context = PrContext {
            template: None,
            commits: vec!["Add login".into(), "Fix tests".into()],
        };
        assert_eq!(
            pr_body(
                &context,
                "Adds a login form.\n",
                Some("https://slack.com/archives/C1/p1")
            ),
            "## Summary\n\nAdds a login form.\n\n## Changes\n\n- Add login\n- Fix tests\n\n\
             ---\nRequested in Slack by CodeButler: https://slack.com/archives/C1/p1\n"
        );
        assert_eq!(
            pr_body(&PrContext::default(), "", None),
            "## Summary\n\n(no description)\n\n## Changes\n\n- (no commits)\n"
        );
    }

    #[test]
    fn body_with_a_template_keeps_it_after_the_description() {
        let context = PrContext {
            template: Some("## Checklist\n\n- [ ] Tests\n\n".into()),
            commits: vec!["ignored with a template".into()],
        };
        assert_eq!(
            pr_body(&context, "Adds a login form.", None),
            "Adds a login form.\n\n## Checklist\n\n- [ ] Tests\n"
        );
        assert_eq!(
            pr_body(&context, "Adds a login form.", Some("https://x/p1")),
            "Adds a login form.\n\n## Checklist\n\n- [ ] Tests\n\n\
             ---\nRequested in Slack by CodeButler: https://x/p1\n"
        );
    }

    #[test]
    fn the_template_comes_from_the_branchs_base_and_never_from_the_run() {
        let f = ThreadFixture::new(&[
            ("docs/PULL_REQUEST_TEMPLATE.md", "docs template\n"),
            (".github/pull_request_template.md", "github template\n"),
        ]);
        let wt = f.worktree();
        let context = pr_context(wt).unwrap();
        assert_eq!(context.template.as_deref(), Some("github template\n"));
        assert!(context.commits.is_empty());

        // What the run commits (here a link in a higher-priority place) and leaves
        // uncommitted is not seen: the template is the default branch's.
        let secret = f.dir.path().join("secret.txt");
        std::fs::write(&secret, "SECRET").unwrap();
        std::os::unix::fs::symlink(&secret, wt.join(".github/PULL_REQUEST_TEMPLATE.md")).unwrap();
        commit_in(&f, "Plant a link").unwrap();
        std::fs::write(wt.join(".github/pull_request_template.md"), "uncommitted").unwrap();
        let context = pr_context(wt).unwrap();
        assert_eq!(context.template.as_deref(), Some("github template\n"));
        assert_eq!(context.commits, ["Plant a link"]);
    }

    #[test]
    fn pr_urls_are_parsed_from_the_last_address_line() {
        assert_eq!(
            parse_pr_url("Creating pull request\n\nhttps://github.com/acme/app/pull/7\n"),
            Some(PullRequest {
                url: "https://github.com/acme/app/pull/7".into(),
                number: 7
            })
        );
        assert_eq!(parse_pr_url("no address here\n"), None);
        assert_eq!(parse_pr_url("https://github.com/acme/app/pull/x\n"), None);
    }

    /// A bare repository at `dir/origin.git`, set as the main repo's `origin`.
    fn with_bare_origin(f: &ThreadFixture) -> git2::Repository {
        let bare_path = f.dir.path().join("origin.git");
        let bare = git2::Repository::init_bare(&bare_path).unwrap();
        let repo = main_repo(f);
        repo.remote("origin", bare_path.to_str().unwrap()).unwrap();
        bare
    }

    #[tokio::test]
    async fn pushes_only_our_branch_without_running_hooks() {
        let f = ThreadFixture::new(&[("a.txt", "a\n")]);
        let (wt, main) = (f.worktree(), f.main());
        let bare = with_bare_origin(&f);
        // A hook in the main repository that would leave a marker if run.
        let marker = f.dir.path().join("hook-ran");
        let hooks = main.join(".git/hooks");
        std::fs::create_dir_all(&hooks).unwrap();
        let hook = hooks.join("pre-push");
        std::fs::write(
            &hook,
            format!("#!/bin/sh\ntouch '{}'\nexit 0\n", marker.display()),
        )
        .unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&hook, std::fs::Permissions::from_mode(0o755)).unwrap();

        std::fs::write(wt.join("a.txt"), "b\n").unwrap();
        let commit = commit_in(&f, "Change a").unwrap();
        push_branch(main, wt, "codebutler/t").await.unwrap();
        let pushed = bare
            .find_reference("refs/heads/codebutler/t")
            .unwrap()
            .target()
            .unwrap();
        assert_eq!(pushed.to_string(), commit.sha);
        assert!(!marker.exists(), "the pre-push hook ran");
        // The thread repository knows what origin has (for "undo").
        assert_eq!(
            thread_repo::open(wt)
                .unwrap()
                .refname_to_id("refs/remotes/origin/codebutler/t")
                .unwrap()
                .to_string(),
            commit.sha
        );

        let err = push_branch(main, wt, "main").await.unwrap_err();
        assert!(matches!(err, ForgeError::NotOurBranch { .. }), "{err}");
        assert!(bare.find_reference("refs/heads/main").is_err());

        // A push git refuses (non-fast-forward, since force is never used) is an error.
        let repo = main_repo(&f);
        let sig = git2::Signature::now("x", "x@example.com").unwrap();
        let first = repo
            .find_commit(repo.head().unwrap().target().unwrap())
            .unwrap();
        repo.reference(
            "refs/heads/codebutler/t",
            first.id(),
            true,
            "rewind for the test",
        )
        .unwrap();
        let tree = first.tree().unwrap();
        repo.commit(
            Some("refs/heads/codebutler/t"),
            &sig,
            &sig,
            "diverge",
            &tree,
            &[&first],
        )
        .unwrap();
        let err = push_branch(main, wt, "codebutler/t").await.unwrap_err();
        assert!(
            matches!(err, ForgeError::Command(CommandError::Failed { .. })),
            "{err}"
        );
        assert!(!err.is_precondition());
        assert_eq!(
            bare.find_reference("refs/heads/codebutler/t")
                .unwrap()
                .target()
                .unwrap()
                .to_string(),
            commit.sha
        );
    }
}
