//! The thread's fixed replies: what a message gets when its command needs nothing but an
//! answer — the allow-list's refusals (typed and clicked), a command kept for developers, a closed thread, a close word or
//! "rebase" that must wait, a button of an earlier plan, a plan carried out already. They
//! live together so a reader finds in one place what the thread says without doing
//! anything, and each command's row of the rule table ([`crate::thread::command`]) has its
//! words here.

/// To a message from someone not on the allow-list.
pub const NOT_ALLOWED: &str = "Sorry, I only take requests from the people on this channel's allow-list (`access.allowedUsers`). Ask whoever runs CodeButler to add you.";

/// To a button click by `user`, who is not on the allow-list.
pub fn click_not_allowed(user: &str) -> String {
    format!(
        "<@{user}>, only the people on this channel's allow-list (`access.allowedUsers`) can use these buttons. Nothing was changed."
    )
}

/// To a message in a closed thread that asks for work (also the end of the PM's answer to
/// a question about its work).
pub const THREAD_CLOSED: &str =
    "This thread is closed. For new work, start a new thread in the channel.";

/// To a close word while the Coder runs.
pub const CODER_RUNS: &str =
    "The Coder is still working: stop the Coder first (say **stop**), then close the thread.";

/// To "merge" in a thread without a pull request.
pub const NOTHING_TO_MERGE: &str = "This thread has no pull request to merge. Say **done** to close it, or **abandon** to close it without its work.";

/// To a button of an earlier plan than the one waiting.
pub const EARLIER_PLAN: &str =
    "That button belongs to an earlier plan; use the buttons on the latest one.";

/// To an approval word after the plan's run ended.
pub const CARRIED_OUT: &str = "That plan was carried out already. Tell me what to change next, say **continue** to go on, or **undo** to drop my last run's changes.";

/// To "rebase" while the Coder runs.
pub const REBASE_WHILE_CODER_RUNS: &str =
    "The Coder is still working: stop the Coder first (say **stop**), then say **rebase**.";

/// To "rebase" while a plan waits.
pub const REBASE_WHILE_PLAN_PENDING: &str =
    "A plan is waiting for approval: approve it or cancel it first, then say **rebase**.";

/// To "rebase" in a thread without a branch.
pub const NOTHING_TO_REBASE: &str = "This thread has no branch yet (the Coder makes one when a plan is approved), so there is nothing to bring up to date.";

/// To a command only developers may give (`what` it would have done), from `user`, who is not
/// one of `developers` (as mentions).
pub fn developers_only(user: &str, what: &str, developers: &str) -> String {
    format!(
        "<@{user}>, only this channel's developers (`access.developers`) can {what}: {developers}. Nothing was changed; you can keep asking questions and discussing here."
    )
}

/// Under a plan proposed for someone who is not a developer: who must approve it.
pub fn plan_waits_for_developer(developers: &str) -> String {
    format!("⏳ This plan waits for a developer's approval: {developers}.")
}

/// After a PM answer a fallback model gave (`fallback`), because `primary` is failing.
pub fn answered_by_fallback(fallback: &str, primary: &str) -> String {
    format!("_Answered by `{fallback}`: `{primary}` is failing, so its fallback stands in._")
}

/// When no PM model answered (`reasons`, each model and why).
pub fn no_pm_model(reasons: &str) -> String {
    format!(
        "No PM model answered ({reasons}). Your message is saved: I'll answer it when you next write in this thread, or when I restart."
    )
}
