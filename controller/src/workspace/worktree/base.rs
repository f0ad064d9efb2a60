//! Where a new worktree's branch starts: `origin`'s default branch, freshly fetched without
//! running anything of the repository's, or the best base the machine has without the network.

use std::path::Path;
use std::time::Duration;

use super::{WorktreeError, blocking, short};
use crate::workspace::forge::ForgeError;
use crate::workspace::git_command::{self, CommandError};

/// Longest `git ls-remote` or `git fetch` of `origin` may take.
pub const FETCH_TIMEOUT: Duration = Duration::from_secs(60);

/// Where a new branch starts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Base {
    /// The commit (hex).
    pub commit: String,
    /// What it is, for people: `origin/main` or `HEAD`.
    pub name: String,
    /// Why it is not freshly fetched `origin/<default>`, when the fetch failed: for the
    /// thread.
    pub warning: Option<String>,
}

/// The branch `git ls-remote --symref <url> HEAD refs/heads/main refs/heads/master`
/// names as the remote's default: what `HEAD` points to, else `main`, else `master`.
pub fn default_branch(ls_remote: &str) -> Option<String> {
    let mut symref = None;
    let mut listed = Vec::new();
    for line in ls_remote.lines() {
        let mut parts = line.split('\t');
        let (Some(left), Some(name)) = (parts.next(), parts.next()) else {
            continue;
        };
        match left.strip_prefix("ref: ") {
            Some(target) if name == "HEAD" => symref = Some(target.to_owned()),
            Some(_) => {}
            None => listed.push(name.to_owned()),
        }
    }
    let branch = match symref {
        Some(target) if listed.iter().any(|n| n == "HEAD" || *n == target) => Some(target),
        _ => ["refs/heads/main", "refs/heads/master"]
            .into_iter()
            .find(|b| listed.iter().any(|n| n == b))
            .map(str::to_owned),
    }?;
    let name = branch.strip_prefix("refs/heads/")?;
    let valid = !name.starts_with('-') && git2::Reference::is_valid_name(&branch);
    valid.then(|| name.to_owned())
}

/// The `origin` remote.
struct Origin {
    url: String,
}

fn find_origin(repo: &Path) -> Result<Option<Origin>, git2::Error> {
    let repository = git2::Repository::open(repo)?;
    let Ok(remote) = repository.find_remote("origin") else {
        return Ok(None);
    };
    Ok(remote.url().ok().map(|url| Origin {
        url: url.to_owned(),
    }))
}

/// The commit of `refs/remotes/origin/<branch>`.
fn remote_branch(repo: &Path, branch: &str) -> Option<String> {
    let repository = git2::Repository::open(repo).ok()?;
    let id = repository
        .find_reference(&format!("refs/remotes/origin/{branch}"))
        .ok()?
        .peel_to_commit()
        .ok()?
        .id();
    Some(id.to_string())
}

/// The local HEAD as a base (what `runnerctl run` starts from).
pub(super) fn offline_head(repo: &Path) -> Result<Base, WorktreeError> {
    let repository = git2::Repository::open(repo).map_err(|e| WorktreeError {
        slug: String::new(),
        message: e.message().to_owned(),
    })?;
    let head = repository
        .head()
        .and_then(|h| h.peel_to_commit())
        .map_err(|e| WorktreeError {
            slug: String::new(),
            message: format!(
                "the repository has no commit to start from ({})",
                e.message()
            ),
        })?;
    Ok(Base {
        commit: head.id().to_string(),
        name: "HEAD".to_owned(),
        warning: None,
    })
}

/// The best base without the network: the last fetched `origin/<preferred>`, then
/// `origin/HEAD`'s branch, `origin/main`, `origin/master`; else the local HEAD.
fn offline_base(repo: &Path, preferred: Option<&str>) -> Result<Base, WorktreeError> {
    let err = |message: String| WorktreeError {
        slug: String::new(),
        message,
    };
    let repository = git2::Repository::open(repo).map_err(|e| err(e.message().to_owned()))?;
    let origin_head = repository
        .find_reference("refs/remotes/origin/HEAD")
        .ok()
        .and_then(|r| r.symbolic_target().ok().flatten().map(str::to_owned))
        .and_then(|t| t.strip_prefix("refs/remotes/origin/").map(str::to_owned));
    let candidates = preferred
        .map(str::to_owned)
        .into_iter()
        .chain(origin_head)
        .chain(["main".to_owned(), "master".to_owned()]);
    for branch in candidates {
        if let Some(commit) = remote_branch(repo, &branch) {
            return Ok(Base {
                commit,
                name: format!("origin/{branch}"),
                warning: None,
            });
        }
    }
    offline_head(repo)
}

/// Learns `origin`'s default branch and fetches it (`+refs/heads/<b>:refs/remotes/origin/<b>`,
/// no tags, no submodules, with [`git_command::safe_git`]).
async fn fetch_default(repo: &Path, url: &str) -> Result<String, ForgeError> {
    let mut ls = git_command::safe_git(repo);
    ls.args([
        "ls-remote",
        "--symref",
        "--",
        url,
        "HEAD",
        "refs/heads/main",
        "refs/heads/master",
    ]);
    let listed = git_command::run(ls, None, "git ls-remote origin", FETCH_TIMEOUT).await?;
    let branch = default_branch(&listed).ok_or_else(|| {
        ForgeError::Command(CommandError::Failed {
            what: "git ls-remote origin".into(),
            status: "no default branch".into(),
            output: "origin has no HEAD, main or master branch".into(),
        })
    })?;
    let refspec = format!("+refs/heads/{branch}:refs/remotes/origin/{branch}");
    let mut fetch = git_command::safe_git(repo);
    fetch.args([
        "fetch",
        "--no-tags",
        "--no-recurse-submodules",
        "--no-write-fetch-head",
        "--",
        url,
        &refspec,
    ]);
    git_command::run(fetch, None, "git fetch origin", FETCH_TIMEOUT).await?;
    Ok(branch)
}

/// Where a new worktree branches from: `origin/<default>` freshly fetched; without an
/// `origin`, the local HEAD (logged); when the fetch fails, the last fetched
/// `origin/<default>` or the local HEAD, with a warning saying which.
pub async fn choose_base(repo: &Path) -> Result<Base, WorktreeError> {
    let dir = repo.to_owned();
    let origin = blocking(move || {
        find_origin(&dir).map_err(|e| WorktreeError {
            slug: String::new(),
            message: format!("read the origin remote: {}", e.message()),
        })
    })
    .await?;
    let Some(origin) = origin else {
        let dir = repo.to_owned();
        let base = blocking(move || offline_base(&dir, None)).await?;
        tracing::info!(
            "no origin remote: new worktrees branch from {} ({})",
            base.name,
            short(&base.commit)
        );
        return Ok(base);
    };
    let fetched = fetch_default(repo, &origin.url).await;
    let dir = repo.to_owned();
    match fetched {
        Ok(branch) => {
            let found = branch.clone();
            let commit = blocking(move || {
                remote_branch(&dir, &found).ok_or_else(|| WorktreeError {
                    slug: String::new(),
                    message: format!("origin/{found} is missing after the fetch"),
                })
            })
            .await?;
            Ok(Base {
                commit,
                name: format!("origin/{branch}"),
                warning: None,
            })
        }
        Err(e) => {
            tracing::warn!("fetch origin: {e}");
            let mut base = blocking(move || offline_base(&dir, None)).await?;
            let what = if base.name == "HEAD" {
                "the local HEAD".to_owned()
            } else {
                format!("the last fetched {}", base.name)
            };
            base.warning = Some(format!(
                "couldn't fetch origin ({}); starting from {what} ({}) instead",
                one_line(&e.to_string()),
                short(&base.commit)
            ));
            Ok(base)
        }
    }
}

/// The first line of an error, at most 300 characters.
fn one_line(text: &str) -> String {
    let line = text.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
    line.chars().take(300).collect()
}
#[cfg(test)]
mod tests {
    use super::*;
    use crate::workspace::thread_repo;
    use crate::workspace::worktree::testing::{commit_files, repo_with};
    use crate::workspace::worktree::{DiskBudget, create};

    /// A bare `origin` at `dir/origin.git` holding the repository's branch, then one more
    /// commit pushed to it from elsewhere (so origin is ahead of the local checkout).
    fn origin_ahead(dir: &Path, repo: &Path) -> (String, git2::Oid) {
        let bare_path = dir.join("origin.git");
        git2::Repository::init_bare(&bare_path).unwrap();
        let local = git2::Repository::open(repo).unwrap();
        let branch = local.head().unwrap().name().unwrap().to_owned();
        local
            .remote("origin", bare_path.to_str().unwrap())
            .unwrap()
            .push(&[format!("{branch}:{branch}")], None)
            .unwrap();
        let bare = git2::Repository::open_bare(&bare_path).unwrap();
        bare.set_head(&branch).unwrap();
        // Someone else pushes a commit.
        let other =
            git2::Repository::clone(bare_path.to_str().unwrap(), dir.join("other")).unwrap();
        let id = commit_files(&other, &[("upstream.txt", "new upstream work")], "upstream");
        other
            .find_remote("origin")
            .unwrap()
            .push(&[format!("{branch}:{branch}")], None)
            .unwrap();
        (branch.trim_start_matches("refs/heads/").to_owned(), id)
    }

    #[test]
    fn default_branch_follows_head_then_main_then_master() {
        let out = "ref: refs/heads/develop\tHEAD\n1111\tHEAD\n2222\trefs/heads/main\n";
        assert_eq!(default_branch(out), Some("develop".into()));
        // HEAD pointing at a branch that does not exist (a fresh bare repository).
        let out = "2222\trefs/heads/master\n";
        assert_eq!(default_branch(out), Some("master".into()));
        let out = "2222\trefs/heads/master\n3333\trefs/heads/main\n";
        assert_eq!(default_branch(out), Some("main".into()));
        assert_eq!(default_branch(""), None);
        // A name that could be taken for an option or an invalid ref is refused.
        assert_eq!(default_branch("ref: refs/heads/-x\tHEAD\n1\tHEAD\n"), None);
        assert_eq!(
            default_branch("ref: refs/heads/a..b\tHEAD\n1\tHEAD\n"),
            None
        );
    }

    #[tokio::test]
    async fn without_origin_the_base_is_the_local_head() {
        let dir = tempfile::tempdir().unwrap();
        let repo = repo_with(dir.path(), &[("a.txt", "a")]);
        let head = git2::Repository::open(&repo)
            .unwrap()
            .head()
            .unwrap()
            .target()
            .unwrap();
        let base = choose_base(&repo).await.unwrap();
        assert_eq!(base.name, "HEAD");
        assert_eq!(base.commit, head.to_string());
        assert_eq!(base.warning, None);
    }

    #[tokio::test]
    async fn the_base_is_origins_default_branch_fetched_without_hooks() {
        let dir = tempfile::tempdir().unwrap();
        let repo = repo_with(dir.path(), &[("a.txt", "a")]);
        let (branch, upstream) = origin_ahead(dir.path(), &repo);
        // A hook that a fetch would run if hooks were on.
        let marker = dir.path().join("hook-ran");
        let hook = repo.join(".git/hooks/reference-transaction");
        std::fs::create_dir_all(hook.parent().unwrap()).unwrap();
        std::fs::write(&hook, format!("#!/bin/sh\ntouch {}\n", marker.display())).unwrap();
        std::fs::set_permissions(&hook, std::os::unix::fs::PermissionsExt::from_mode(0o755))
            .unwrap();

        let base = choose_base(&repo).await.unwrap();
        assert_eq!(base.name, format!("origin/{branch}"));
        assert_eq!(base.commit, upstream.to_string());
        assert_eq!(base.warning, None);
        assert!(!marker.exists(), "a hook ran during the fetch");

        let tree = create(&repo, "Use upstream", Some(&base), DiskBudget::NONE)
            .await
            .unwrap();
        assert_eq!(
            std::fs::read_to_string(tree.path.join("upstream.txt")).unwrap(),
            "new upstream work"
        );
        // The thread knows its base as origin's branch.
        assert_eq!(
            thread_repo::open(&tree.path)
                .unwrap()
                .refname_to_id(&format!("refs/remotes/origin/{branch}"))
                .unwrap(),
            upstream
        );
        // The main checkout did not move.
        assert!(!repo.join("upstream.txt").exists());
    }

    #[tokio::test]
    async fn a_failed_fetch_falls_back_and_says_which_base() {
        let dir = tempfile::tempdir().unwrap();
        let repo = repo_with(dir.path(), &[("a.txt", "a")]);
        let (branch, upstream) = origin_ahead(dir.path(), &repo);
        choose_base(&repo).await.unwrap();
        // origin goes away: the last fetched origin/<branch> is used.
        std::fs::rename(dir.path().join("origin.git"), dir.path().join("gone.git")).unwrap();
        let base = choose_base(&repo).await.unwrap();
        assert_eq!(base.name, format!("origin/{branch}"));
        assert_eq!(base.commit, upstream.to_string());
        let warning = base.warning.unwrap();
        assert!(warning.starts_with("couldn't fetch origin ("), "{warning}");
        assert!(
            warning.ends_with(&format!(
                "starting from the last fetched origin/{branch} ({}) instead",
                &upstream.to_string()[..7]
            )),
            "{warning}"
        );

        // Never fetched: the local HEAD.
        let dir = tempfile::tempdir().unwrap();
        let repo = repo_with(dir.path(), &[("a.txt", "a")]);
        git2::Repository::open(&repo)
            .unwrap()
            .remote("origin", dir.path().join("missing.git").to_str().unwrap())
            .unwrap();
        let base = choose_base(&repo).await.unwrap();
        assert_eq!(base.name, "HEAD");
        assert!(
            base.warning
                .unwrap()
                .contains("; starting from the local HEAD ("),
        );
    }
}
