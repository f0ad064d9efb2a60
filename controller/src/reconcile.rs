//! What a crash leaves behind, sorted out when the daemon starts again, before anything can
//! start a run:
//!
//! 1. **Runs cut off mid-start.** An approval or follow-up still pending with its start
//!    begun ([`crate::store::RunStart`]): if its run was recorded, that run was interrupted
//!    and is reported below, so the message is done (a follow-up's run gets the
//!    conversation it was started with, for "continue"); if not, nothing ran, so the thread
//!    is told, an approved plan waits for approval again (with its buttons), and the message
//!    is done. Re-handling it instead would find its plan taken and answer nonsense.
//! 2. **Run ends never reported** (runs the supervisor marked interrupted at start, runs that
//!    ended while the daemon went down): reported now, once.
//! 3. **Worktrees and branches no run owns** (a crash between creating a worktree and
//!    recording its run): git worktrees, `codebutler/` branches and empty directories under
//!    `.codebutler/branches/` whose slug no run records are removed with
//!    [`worktree::remove`]. A branch with commits no other ref holds is kept and logged; a
//!    directory with files that git knows nothing of is left alone.
//!
//! The effects these record are delivered with the rest of the outbox after start-up.

use std::collections::HashSet;
use std::path::Path;

use crate::coder::SlackCoder;
use crate::slack::effects::Effects;
use crate::slack::interactive::{plan_blocks, plan_digest};
use crate::store::{Change, CutOffStart, RunStart, Store};
use crate::workspace::thread_repo::BRANCH_PREFIX;
use crate::workspace::worktree;

const CODER_PREFIX: &str = "*Coder:* ";

/// Runs the start-up reconciliation (see the module's documentation). Failures are logged:
/// what is left is tried again at the next start.
pub async fn after_stop(coder: &SlackCoder) {
    match coder.store.cut_off_starts().await {
        Ok(starts) => {
            for start in starts {
                cut_off(&coder.store, coder, &start).await;
            }
        }
        Err(e) => tracing::error!("read messages cut off while starting a run: {e}"),
    }
    coder.report_unreported_runs().await;
    remove_orphans(coder).await;
}

/// Removes what no run owns (step 3).
async fn remove_orphans(coder: &SlackCoder) {
    let owned = match coder.store.run_worktrees().await {
        Ok(owned) => owned,
        Err(e) => {
            tracing::error!("read the runs' worktrees: {e}");
            return;
        }
    };
    let repo = coder.layout.repo.clone();
    let found = {
        let repo = repo.clone();
        tokio::task::spawn_blocking(move || orphans(&repo, &owned)).await
    };
    let orphans = match found {
        Ok(orphans) => orphans,
        Err(e) => {
            tracing::error!("look for worktrees no run owns: {e}");
            return;
        }
    };
    for tree in orphans {
        tracing::warn!(
            "removing {} and its branch {}: no run owns them (a crash cut their run's start short)",
            tree.path.display(),
            tree.branch
        );
        if let Err(e) = worktree::remove(&repo, &tree).await {
            tracing::error!("remove orphaned worktree {}: {e}", tree.path.display());
        }
    }
}

/// Settles one message whose run start a crash cut off.
async fn cut_off(store: &Store, coder: &SlackCoder, start: &CutOffStart) {
    let msg = &start.msg;
    let thread = msg.thread();
    if let Some(run) = &start.run_id {
        tracing::info!(thread = %thread, "message {} started run {run} before the stop", msg.ts);
        if start.kind == RunStart::FollowUp {
            coder.seed_cut_off_follow_up(msg, run).await;
        }
        if let Err(e) = store.mark_processed(msg).await {
            tracing::error!(thread = %thread, "mark message {} processed: {e}", msg.ts);
        }
        return;
    }
    tracing::warn!(thread = %thread, "message {} was cut off while its run was starting", msg.ts);
    let mut changes = vec![Change::Processed(msg)];
    let effects = match start.kind {
        RunStart::Approval => {
            changes.push(Change::PlanPending(&thread));
            let digest = match store.plan(&thread).await {
                Ok(Some(plan)) => plan_digest(&plan),
                Ok(None) => String::new(),
                Err(e) => {
                    tracing::error!(thread = %thread, "read the plan: {e}");
                    return;
                }
            };
            let text = format!(
                "{CODER_PREFIX}The CodeButler service restarted while I was getting ready to start, before any work began. The plan is waiting again: approve it to start."
            );
            let blocks = plan_blocks(&text, &digest);
            Effects::new(&thread).post_with_blocks(&text, blocks)
        }
        RunStart::FollowUp => Effects::new(&thread).reply(
            "The CodeButler service restarted before I could start on your message, so nothing ran. Send it again to start.",
            CODER_PREFIX,
        ),
    };
    if let Err(e) = coder.outbox.commit(&changes, &effects).await {
        tracing::error!(thread = %thread, "report a run cut off mid-start: {e}");
    }
}

/// The worktrees no run owns (`owned`: the runs' worktree paths and branches): each git
/// worktree, `codebutler/` branch and empty directory under `.codebutler/branches/` whose
/// slug no run records, unless its branch has commits of its own. Blocking (git2).
fn orphans(repo: &Path, owned: &[(String, String)]) -> Vec<worktree::Worktree> {
    let branches_dir = repo.join(".codebutler").join("branches");
    let mut owned_slugs = HashSet::new();
    for (path, branch) in owned {
        if let Some(name) = Path::new(path).file_name() {
            owned_slugs.insert(name.to_string_lossy().into_owned());
        }
        if let Some(slug) = branch.strip_prefix(BRANCH_PREFIX) {
            owned_slugs.insert(slug.to_owned());
        }
    }
    let repository = match git2::Repository::open(repo) {
        Ok(r) => r,
        Err(e) => {
            tracing::error!(
                "open {} to look for orphaned worktrees: {}",
                repo.display(),
                e.message()
            );
            return Vec::new();
        }
    };
    // Git's worktrees, `codebutler/` branches, and directories a start claimed but left
    // empty; a directory with files that git knows nothing of is not ours to judge.
    // A source that cannot be read adds nothing (nothing is removed on its account), and is
    // logged: what it held stays for the next start.
    let mut slugs: HashSet<String> = HashSet::new();
    match repository.worktrees() {
        Ok(names) => slugs.extend(names.iter().flatten().flatten().map(str::to_owned)),
        Err(e) => tracing::warn!("list worktrees to look for orphans: {}", e.message()),
    }
    match repository.branches(Some(git2::BranchType::Local)) {
        Ok(branches) => {
            for (branch, _) in branches.flatten() {
                if let Ok(Some(name)) = branch.name()
                    && let Some(slug) = name.strip_prefix(BRANCH_PREFIX)
                {
                    slugs.insert(slug.to_owned());
                }
            }
        }
        Err(e) => tracing::warn!("list branches to look for orphans: {}", e.message()),
    }
    match std::fs::read_dir(&branches_dir) {
        Ok(entries) => {
            for entry in entries.flatten() {
                let empty = std::fs::read_dir(entry.path()).is_ok_and(|mut d| d.next().is_none());
                if empty {
                    slugs.insert(entry.file_name().to_string_lossy().into_owned());
                }
            }
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => tracing::warn!("read {} to look for orphans: {e}", branches_dir.display()),
    }
    let mut orphans: Vec<String> = slugs.difference(&owned_slugs).cloned().collect();
    orphans.sort();
    orphans
        .into_iter()
        .filter_map(|slug| {
            let branch = format!("{BRANCH_PREFIX}{slug}");
            if has_own_commits(&repository, &branch) {
                tracing::warn!("branch {branch} has no run but commits of its own; kept");
                return None;
            }
            Some(worktree::Worktree {
                path: branches_dir.join(&slug),
                branch,
            })
        })
        .collect()
}

/// Whether the local branch `name` holds a commit no other branch or remote ref reaches
/// (work that removing it would lose). False when there is no such branch.
fn has_own_commits(repository: &git2::Repository, name: &str) -> bool {
    let Ok(branch) = repository.find_branch(name, git2::BranchType::Local) else {
        return false;
    };
    let Some(tip) = branch.get().target() else {
        return false;
    };
    let full = format!("refs/heads/{name}");
    let Ok(mut walk) = repository.revwalk() else {
        return true;
    };
    if walk.push(tip).is_err() {
        return true;
    }
    let Ok(references) = repository.references() else {
        return true;
    };
    for reference in references.flatten() {
        if reference.name().ok() == Some(full.as_str()) {
            continue;
        }
        // Refs to trees or blobs (checkpoints) hold no commits.
        if let Ok(commit) = reference.peel_to_commit()
            && walk.hide(commit.id()).is_err()
        {
            return true;
        }
    }
    walk.next().is_some()
}
