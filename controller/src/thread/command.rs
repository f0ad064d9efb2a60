//! What a message asks of its thread: [`classify`] turns a message and the thread's
//! [`Facts`] into one [`Command`], with no I/O, so the thread's whole order of rules reads
//! (and is tested) as one table. [`crate::thread::handler`] reads the facts once per message
//! and applies the command.
//!
//! The order of the rules is the policy: a button click is judged by its button, and what the
//! PR watcher saw on GitHub by the thread's state — a message is a click, the watcher's or a
//! notice only by its stored [`Origin`], never by its text, so typed text that imitates a
//! marker is what a person said; someone not on the allow-list gets only a
//! refusal; *yes* or *no* to a waiting review round comes next (`classify_review`), then
//! replies to an open memory proposal and corrections (`classify_memory`); a closed thread takes no more work (a question about it reaches the
//! PM read-only, see [`is_question`]; anything else gets a short reply); "undo" and
//! "budget $N" work in any other state; a running Coder takes everything else first (a close
//! word or "rebase" only gets "stop the Coder first"); then (`classify_past_coder`, where
//! a message the running Coder missed starts) an approval of a pending plan, a
//! the words that answer the Artist's open drawing ("draw it", "use it", "again", "cancel"),
//! a close word ("merge", "abandon", "done"), "rebase", a follow-up on an ended run, a
//! message for the Artist (and the PM), one for another role, and last the PM.

use crate::domain::parse_notice;
use crate::domain::{
    ButtonAction, Click, DrawingStage, IncomingMessage, Mention, Origin, PullRequestRef, Role,
    RunRecord, ThreadState,
};
use crate::domain::{PrEvent, ReviewEvent};
use crate::gateway::budget::parse_budget_command;
use crate::memory::proposal::{Reply, parse_correction, parse_reply};
use crate::thread::approval::{is_approval, is_decline, is_rebase, is_stop, is_undo};
use crate::thread::artist_words::{DrawingWord, drawing_word};
use crate::thread::close_plan::{CloseWord, close_word};
use crate::thread::permissions::gate;
use crate::thread::routing::{Route, mentioned_roles, route};

/// What a message asks of its thread.
#[derive(Clone, Debug, PartialEq)]
pub enum Command {
    /// A click by someone not on the allow-list.
    ClickNotAllowed,
    /// The Stop button of a running Coder's status.
    StopButton(Click),
    /// A plan button when no plan waits (clicked twice, or already approved): nothing changes.
    SpentClick,
    /// A plan button of an earlier plan than the one waiting.
    EarlierPlanButton,
    /// The Approve button of the waiting plan.
    ApproveButton(Click),
    /// The Cancel button of the waiting plan: the plan is withdrawn.
    CancelButton(Click),
    /// A message from someone not on the allow-list.
    NotAllowed,
    /// A message in a closed thread: new work belongs in a new thread.
    ThreadClosed,
    /// A question about a closed thread's work: the PM answers it read-only.
    QuestionAfterClose,
    /// "undo": drop the changes of the thread's last run.
    Undo,
    /// "budget $N": the thread's cap.
    SetBudget(f64),
    /// "stop" while the Coder runs.
    StopCoder,
    /// Anything else while the Coder runs: the answer to its question, or a message for its
    /// next turn.
    ToRunningCoder,
    /// A close word ("merge", "abandon", "done") while the Coder runs: stop it first.
    CloseWhileCoderRuns,
    /// "merge", "ship it"… once the thread's pull request is open: merge it and close;
    /// "merge anyway" (`anyway`) merges over its reviewers' objections.
    Merge { pr: PullRequestRef, anyway: bool },
    /// "merge" in a thread without a pull request: nothing to merge.
    NothingToMerge,
    /// "abandon", "close without merging": close without merging (its pull request, if
    /// any, is left open on GitHub).
    Abandon { pr: Option<PullRequestRef> },
    /// "done" in a thread without a pull request: close it.
    Done,
    /// The PR watcher saw the thread's pull request merged (or closed) on GitHub: close the
    /// thread the same way.
    EndedOnGitHub { event: PrEvent, pr: PullRequestRef },
    /// What the PR watcher saw while the Coder runs, or in a thread with no open pull
    /// request: nothing now (the watcher sees it again at its next poll).
    WatchLater,
    /// A typed approval of the waiting plan.
    Approve,
    /// An approval word after the plan's run ended: not new work.
    AlreadyCarriedOut,
    /// A message after the thread's run ended: a new run goes on from `last`.
    FollowUp { last: Box<RunRecord> },
    /// A message for roles other than the PM only.
    OtherRoles(Vec<Mention>),
    /// A message for the Artist: it proposes an image prompt.
    AskArtist,
    /// A message for the PM and the Artist: the PM answers, then the Artist.
    AskPmThenArtist,
    /// "draw it" (or "again") for the thread's open drawing `number`: draw it.
    Draw { number: i64 },
    /// "use it" or "use it at <path>" for the drawn drawing `number`: commit it.
    UseDrawing { number: i64, path: Option<String> },
    /// "cancel" for the open drawing `number`.
    CancelDrawing { number: i64 },
    /// Everything else: the PM answers.
    AskPm,
    /// The researcher answers it (`@codebutler.researcher`).
    AskResearcher,
    /// The PR watcher opened a review round (comments gathered, or checks failed): sort it
    /// and propose it.
    ReviewRound,
    /// The PR watcher says the pull request reached `github.maxReviewRounds`.
    ReviewCapped,
    /// The PR watcher saw a head of the pull request the reviewer model has not reviewed.
    ReviewerDue,
    /// An approval of the proposed review round `round`: a follow-up run from `last` with
    /// its comments or failed checks.
    ApproveReview { round: i64, last: Box<RunRecord> },
    /// *no* to the proposed review round `round`.
    DeclineReview { round: i64 },
    /// A reply to the thread's open memory proposal (`yes`, `no`, an edit).
    MemoryReply(Reply),
    /// "correct N: <answer>": a memory proposal from a correction of the Coder's question N.
    CorrectAnswer { number: usize, answer: String },
    /// "rebase" after the thread's run ended: bring its branch up to date with the default
    /// branch (see [`crate::thread::rebase_commands`]).
    Rebase {
        last: Box<RunRecord>,
        pr: Option<PullRequestRef>,
    },
    /// "rebase" while the Coder runs or its run is being prepared: stop it first.
    RebaseWhileCoderRuns,
    /// "rebase" while a plan waits for approval: approve or cancel it first.
    RebaseWhilePlanPending,
    /// "rebase" in a thread whose Coder has not run: there is no branch yet.
    NothingToRebase,
    /// A coordination notice stored in the thread (an overlap, a conflict, a merge
    /// elsewhere): post it.
    Notice(String),
    /// A message the controller stored (a click, the watcher's, a notice) whose text it
    /// cannot read back: nothing is done (only a change of the markers' format makes one).
    Unreadable,
    /// A command only developers may give (what it would have done, in a few words), from
    /// someone who is not one: the reply names the developers; nothing else changes (see
    /// [`crate::thread::permissions`]).
    DevelopersOnly(&'static str),
}

/// What the rules know of a thread besides the message itself, read once per message by
/// the handler: plain data, so the whole order of the rules is one pure function
/// ([`classify`]) of the message and these.
#[derive(Clone, Debug, PartialEq)]
pub struct Facts {
    /// Whether the message's author is on the allow-list (`access.allowedUsers`, or it is
    /// empty).
    pub allowed: bool,
    /// Whether the message's author is a developer (`access.developers`, or it is empty).
    pub developer: bool,
    /// The thread's state.
    pub state: ThreadState,
    /// The review round proposed in the thread and waiting for a *yes* or a *no*, if any.
    pub open_round: Option<i64>,
    /// Whether a memory proposal of the thread waits for its reply.
    pub proposal_open: bool,
    /// The running Coder was to take the message, but its run had ended as the message
    /// came: `state` was read again, and only the rules after the running Coder's apply.
    pub coder_missed: bool,
    /// The thread's open drawing (its number and stage), if the Artist has one.
    pub drawing: Option<(i64, DrawingStage)>,
}

/// The command `msg` gives its thread, given the thread's `facts`: every rule, in order,
/// then who may give it ([`gate`]).
pub fn classify(msg: &IncomingMessage, facts: &Facts) -> Command {
    let command = if !facts.coder_missed
        && let Some(command) = up_to_the_running_coder(msg, facts)
    {
        command
    } else {
        classify_past_coder(msg, &facts.state, facts.drawing)
    };
    gate(command, facts.developer)
}

/// The rules up to and including the running Coder's; `None`: the rules after it decide.
fn up_to_the_running_coder(msg: &IncomingMessage, facts: &Facts) -> Option<Command> {
    let Facts {
        allowed,
        state,
        open_round,
        proposal_open,
        ..
    } = facts;
    match msg.origin {
        Origin::Click => {
            return Some(msg.click().map_or(Command::Unreadable, |click| {
                classify_click(click, *allowed, state, facts.drawing)
            }));
        }
        Origin::Notice => {
            return Some(parse_notice(msg).map_or(Command::Unreadable, |notice| {
                Command::Notice(notice.to_owned())
            }));
        }
        Origin::Watcher => return Some(classify_watcher(&msg.text, state)),
        Origin::Person => {}
    }
    let text = msg.text.as_str();
    if !allowed {
        return Some(Command::NotAllowed);
    }
    if let Some(command) = classify_review(msg, *allowed, *open_round, state)
        .or_else(|| classify_memory(msg, *allowed, *proposal_open))
    {
        return Some(command);
    }
    if let ThreadState::Closed(_) = state {
        return Some(after_close(text));
    }
    if is_undo(text) && state.with_coder() {
        return Some(Command::Undo);
    }
    if let Some(cap) = parse_budget_command(text) {
        return Some(Command::SetBudget(cap));
    }
    if *state == ThreadState::CoderRunning {
        return Some(if is_stop(text) {
            Command::StopCoder
        } else if close_word(text).is_some() {
            Command::CloseWhileCoderRuns
        } else if is_rebase(text) {
            Command::RebaseWhileCoderRuns
        } else {
            Command::ToRunningCoder
        });
    }
    None
}

/// What the PR watcher stored (`text`, its marker) asks of the thread in `state`.
fn classify_watcher(text: &str, state: &ThreadState) -> Command {
    if let Some(event) = PrEvent::parse(text) {
        return match state {
            ThreadState::RunEnded { pr: Some(pr), .. } => Command::EndedOnGitHub {
                event,
                pr: pr.clone(),
            },
            _ => Command::WatchLater,
        };
    }
    match (ReviewEvent::parse(text), state) {
        (None, _) => Command::Unreadable,
        (Some(_), ThreadState::Closed(_)) => Command::WatchLater,
        (Some(ReviewEvent::Round), _) => Command::ReviewRound,
        (Some(ReviewEvent::Capped), _) => Command::ReviewCapped,
        (Some(ReviewEvent::Reviewer), _) => Command::ReviewerDue,
    }
}

/// The review rule, which comes after the allow-list and before the memory rules (the
/// proposal asked last gets the answer): while review round `open_round` waits and the
/// thread's run has ended with its pull request open, an approval word approves the round
/// and a decline word declines it. `None`: the other rules decide.
fn classify_review(
    msg: &IncomingMessage,
    allowed: bool,
    open_round: Option<i64>,
    state: &ThreadState,
) -> Option<Command> {
    let round = open_round?;
    if !allowed || msg.origin != Origin::Person {
        return None;
    }
    let ThreadState::RunEnded { last, pr: Some(_) } = state else {
        return None;
    };
    if is_approval(&msg.text) {
        Some(Command::ApproveReview {
            round,
            last: last.clone(),
        })
    } else if is_decline(&msg.text) {
        Some(Command::DeclineReview { round })
    } else {
        None
    }
}

/// The memory rules, which come after the allow-list and before every other rule (a
/// proposal can outlive the thread's close): while a proposal is open (`proposal_open`) its
/// grammar words answer it; "correct N: …" corrects an answer the Coder got. `None`: the
/// other rules ([`classify`]) decide.
fn classify_memory(msg: &IncomingMessage, allowed: bool, proposal_open: bool) -> Option<Command> {
    if !allowed || msg.origin != Origin::Person {
        return None;
    }
    if proposal_open && let Some(reply) = parse_reply(&msg.text) {
        return Some(Command::MemoryReply(reply));
    }
    parse_correction(&msg.text).map(|(number, answer)| Command::CorrectAnswer { number, answer })
}

/// The command of a message no running Coder took (none runs, or its run ended as the
/// message came): the rules after the running Coder's.
fn classify_past_coder(
    msg: &IncomingMessage,
    state: &ThreadState,
    drawing: Option<(i64, DrawingStage)>,
) -> Command {
    let text = msg.text.as_str();
    match state {
        ThreadState::Closed(_) => return after_close(text),
        ThreadState::PlanPending { .. } if is_approval(text) => return Command::Approve,
        _ => {}
    }
    if let Some((number, stage)) = drawing
        && let Some(word) = drawing_word(text, stage)
    {
        return match word {
            DrawingWord::Draw => Command::Draw { number },
            DrawingWord::Use(path) => Command::UseDrawing { number, path },
            DrawingWord::Cancel => Command::CancelDrawing { number },
        };
    }
    if let Some(word) = close_word(text) {
        return classify_close(word, state);
    }
    if is_rebase(text) {
        return classify_rebase(state);
    }
    match state {
        ThreadState::RunEnded { last, .. }
            if !mentioned_roles(text).iter().any(|m| {
                matches!(m, Mention::Role(Role::Pm | Role::Artist | Role::Researcher))
            }) =>
        {
            return if is_approval(text) {
                Command::AlreadyCarriedOut
            } else {
                Command::FollowUp { last: last.clone() }
            };
        }
        _ => {}
    }
    match route(text) {
        Route::OtherRoles(named) => Command::OtherRoles(named),
        Route::Pm => Command::AskPm,
        Route::Artist => Command::AskArtist,
        Route::PmThenArtist => Command::AskPmThenArtist,
        Route::Researcher => Command::AskResearcher,
    }
}

/// A message in a closed thread: a question about its work goes to the PM (read-only);
/// anything else gets the short reply.
fn after_close(text: &str) -> Command {
    if is_question(text) {
        Command::QuestionAfterClose
    } else {
        Command::ThreadClosed
    }
}

/// Words that open a question (compared lower-case with the message's first word).
const QUESTION_WORDS: [&str; 16] = [
    "what", "why", "how", "when", "where", "which", "who", "whose", "is", "are", "was", "were",
    "did", "does", "can", "could",
];

/// Whether `text` asks something: it has a question mark, it is addressed to
/// `@codebutler.pm`, or its first word (after any mentions) is one of [`QUESTION_WORDS`].
pub fn is_question(text: &str) -> bool {
    if text.contains('?') || mentioned_roles(text).contains(&Mention::Role(Role::Pm)) {
        return true;
    }
    let first = text
        .split_whitespace()
        .find(|word| !word.starts_with('@') && !word.starts_with("<@"))
        .map(|word| {
            word.trim_matches(|c: char| !c.is_alphanumeric())
                .to_lowercase()
        });
    first.is_some_and(|word| QUESTION_WORDS.contains(&word.as_str()))
}

/// A close word, past a running Coder and a pending plan's approval: "merge" needs the
/// thread's open pull request; "done" merges it when there is one and otherwise closes the
/// thread; "abandon" closes it either way.
fn classify_close(word: CloseWord, state: &ThreadState) -> Command {
    let pr = match state {
        ThreadState::RunEnded { pr, .. } => pr.clone(),
        _ => None,
    };
    match (word, pr) {
        (CloseWord::Merge | CloseWord::Done, Some(pr)) => Command::Merge { pr, anyway: false },
        (CloseWord::MergeAnyway, Some(pr)) => Command::Merge { pr, anyway: true },
        (CloseWord::Merge | CloseWord::MergeAnyway, None) => Command::NothingToMerge,
        (CloseWord::Done, None) => Command::Done,
        (CloseWord::Abandon, pr) => Command::Abandon { pr },
    }
}

/// "rebase", past a running Coder: it needs the thread's branch, which an ended run left.
fn classify_rebase(state: &ThreadState) -> Command {
    match state {
        ThreadState::RunEnded { last, pr } => Command::Rebase {
            last: last.clone(),
            pr: pr.clone(),
        },
        ThreadState::CoderRunning | ThreadState::Preparing => Command::RebaseWhileCoderRuns,
        ThreadState::PlanPending { .. } => Command::RebaseWhilePlanPending,
        ThreadState::Conversing | ThreadState::Closed(_) => Command::NothingToRebase,
    }
}

/// A button click: the same rules as the typed words, judged by the button (the Artist's
/// buttons by the drawing they were shown with, which must still wait to be drawn).
fn classify_click(
    click: Click,
    allowed: bool,
    state: &ThreadState,
    drawing: Option<(i64, DrawingStage)>,
) -> Command {
    if !allowed {
        return Command::ClickNotAllowed;
    }
    if click.action == ButtonAction::StopRun {
        return Command::StopButton(click);
    }
    if matches!(
        click.action,
        ButtonAction::DrawIt | ButtonAction::CancelDrawing
    ) {
        return match drawing {
            Some((number, DrawingStage::Proposed)) if click.value == number.to_string() => {
                if click.action == ButtonAction::DrawIt {
                    Command::Draw { number }
                } else {
                    Command::CancelDrawing { number }
                }
            }
            _ => Command::SpentClick,
        };
    }
    match state {
        ThreadState::PlanPending { digest, .. } if *digest != click.value => {
            Command::EarlierPlanButton
        }
        ThreadState::PlanPending { .. } if click.action == ButtonAction::Approve => {
            Command::ApproveButton(click)
        }
        ThreadState::PlanPending { .. } => Command::CancelButton(click),
        _ => Command::SpentClick,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::{Closure, Plan, RunState, ThreadKey};

    fn pr() -> PullRequestRef {
        PullRequestRef {
            number: 7,
            url: "https://github.com/acme/app/pull/7".into(),
        }
    }

    fn msg(text: &str) -> IncomingMessage {
        IncomingMessage {
            channel: "C1".into(),
            ts: "1.2".into(),
            thread_ts: "1.1".into(),
            user: "U1".into(),
            text: text.into(),
            event_id: None,
            origin: Origin::Person,
        }
    }

    /// A message the controller stored with `origin` (a click, the watcher's, a notice).
    fn stored(origin: Origin, text: &str) -> IncomingMessage {
        IncomingMessage {
            origin,
            ..msg(text)
        }
    }

    fn ended() -> RunRecord {
        RunRecord {
            id: "r1".into(),
            thread: ThreadKey {
                channel: "C1".into(),
                thread_ts: "1.1".into(),
            },
            state: RunState::Finished,
            plan: String::new(),
            model: "m".into(),
            worktree: "w".into(),
            branch: "b".into(),
            max_turns: 1,
            turns: 1,
            prompt_tokens: 0,
            completion_tokens: 0,
            cost: 0.0,
            ending: None,
            exit_code: None,
            runner_pid: None,
            created_at: "t".into(),
            started_at: None,
            ended_at: None,
        }
    }

    /// The facts of a thread in `state` with nothing open, for a message whose author is
    /// on the allow-list or not (`allowed`).
    fn facts(allowed: bool, state: &ThreadState) -> Facts {
        Facts {
            allowed,
            developer: allowed,
            state: state.clone(),
            open_round: None,
            proposal_open: false,
            coder_missed: false,
            drawing: None,
        }
    }

    fn pending() -> ThreadState {
        ThreadState::PlanPending {
            plan: Plan {
                summary: "s".into(),
                steps: vec!["a".into()],
                files: vec![],
            },
            digest: "d1".into(),
        }
    }

    /// A click on `action` carrying `value`, as the Slack adapter stores it.
    fn click(action: ButtonAction, value: &str) -> String {
        Click {
            action,
            message_ts: "1.5".into(),
            value: value.into(),
            message_text: "the message".into(),
        }
        .to_text()
    }

    #[test]
    fn typed_messages() {
        use Command::*;
        use ThreadState::{CoderRunning, Conversing, Preparing};
        let run_ended = ThreadState::RunEnded {
            last: Box::new(ended()),
            pr: None,
        };
        let pr_open = ThreadState::RunEnded {
            last: Box::new(ended()),
            pr: Some(pr()),
        };
        let follow_up = FollowUp {
            last: Box::new(ended()),
        };
        let merged = ThreadState::Closed(Closure::Merged);
        let abandoned = ThreadState::Closed(Closure::Abandoned);
        let cases: Vec<(&str, bool, ThreadState, Command)> = vec![
            ("how do we deploy?", false, merged.clone(), NotAllowed),
            ("now rename it", true, merged.clone(), ThreadClosed),
            ("yes", true, merged.clone(), ThreadClosed),
            ("undo", true, merged.clone(), ThreadClosed),
            ("budget $5", true, abandoned.clone(), ThreadClosed),
            ("stop", true, abandoned.clone(), ThreadClosed),
            (
                "@codebutler.pm what changed?",
                true,
                abandoned.clone(),
                QuestionAfterClose,
            ),
            (
                "why did it touch the Makefile?",
                true,
                merged.clone(),
                QuestionAfterClose,
            ),
            (
                "@codebutler.coder fix it",
                true,
                merged.clone(),
                ThreadClosed,
            ),
            ("now rename it?", true, abandoned, QuestionAfterClose),
            ("merge", true, merged.clone(), ThreadClosed),
            (
                "done",
                true,
                ThreadState::Closed(Closure::Done),
                ThreadClosed,
            ),
            ("abandon", true, merged, ThreadClosed),
            ("merge", false, pr_open.clone(), NotAllowed),
            (
                "merge",
                true,
                pr_open.clone(),
                Merge {
                    pr: pr(),
                    anyway: false,
                },
            ),
            (
                "Merge it!",
                true,
                pr_open.clone(),
                Merge {
                    pr: pr(),
                    anyway: false,
                },
            ),
            (
                "ship it",
                true,
                pr_open.clone(),
                Merge {
                    pr: pr(),
                    anyway: false,
                },
            ),
            (
                "DONE",
                true,
                pr_open.clone(),
                Merge {
                    pr: pr(),
                    anyway: false,
                },
            ),
            (
                "<@U0BOT> done.",
                true,
                pr_open.clone(),
                Merge {
                    pr: pr(),
                    anyway: false,
                },
            ),
            (
                "merge anyway",
                true,
                pr_open.clone(),
                Merge {
                    pr: pr(),
                    anyway: true,
                },
            ),
            (
                "Ship it anyway.",
                true,
                pr_open.clone(),
                Merge {
                    pr: pr(),
                    anyway: true,
                },
            ),
            ("merge anyway", false, pr_open.clone(), NotAllowed),
            ("merge anyway", true, run_ended.clone(), NothingToMerge),
            ("merge anyway", true, CoderRunning, CloseWhileCoderRuns),
            (
                "merge the two functions",
                true,
                pr_open.clone(),
                FollowUp {
                    last: Box::new(ended()),
                },
            ),
            ("abandon", true, pr_open.clone(), Abandon { pr: Some(pr()) }),
            (
                "close without merging",
                true,
                pr_open.clone(),
                Abandon { pr: Some(pr()) },
            ),
            ("yes", true, pr_open.clone(), AlreadyCarriedOut),
            ("merge", true, run_ended.clone(), NothingToMerge),
            ("done", true, run_ended.clone(), Done),
            ("abandon", true, run_ended.clone(), Abandon { pr: None }),
            ("done", true, Conversing, Done),
            ("merge", true, Conversing, NothingToMerge),
            ("done", true, pending(), Done),
            ("abandon", true, pending(), Abandon { pr: None }),
            // An approval word first approves a waiting plan.
            ("ship it", true, pending(), Approve),
            ("abandon", true, Preparing, Abandon { pr: None }),
            ("merge", true, CoderRunning, CloseWhileCoderRuns),
            ("done", true, CoderRunning, CloseWhileCoderRuns),
            ("abandon", true, CoderRunning, CloseWhileCoderRuns),
            ("yes", false, pending(), NotAllowed),
            ("how do we deploy?", false, Conversing, NotAllowed),
            ("how do we deploy?", true, Conversing, AskPm),
            ("yes", true, Conversing, AskPm),
            ("yes", true, pending(), Approve),
            ("yes but change X", true, pending(), AskPm),
            ("undo", true, Conversing, AskPm),
            ("undo", true, pending(), AskPm),
            ("undo", true, Preparing, Undo),
            ("undo", true, CoderRunning, Undo),
            ("undo", true, run_ended.clone(), Undo),
            ("budget $5", true, Conversing, SetBudget(5.0)),
            ("budget $5", true, CoderRunning, SetBudget(5.0)),
            ("budget $5", true, run_ended.clone(), SetBudget(5.0)),
            ("stop", true, CoderRunning, StopCoder),
            ("yes", true, CoderRunning, ToRunningCoder),
            ("use tabs", true, CoderRunning, ToRunningCoder),
            ("stop", true, Conversing, AskPm),
            ("yes", true, run_ended.clone(), AlreadyCarriedOut),
            ("now rename it", true, run_ended.clone(), follow_up.clone()),
            (
                "@codebutler.coder now rename it",
                true,
                run_ended.clone(),
                follow_up,
            ),
            (
                "@codebutler.pm what changed?",
                true,
                run_ended.clone(),
                AskPm,
            ),
            ("now rename it", true, Preparing, AskPm),
            (
                "@codebutler.researcher what does this error mean?",
                true,
                run_ended.clone(),
                AskResearcher,
            ),
            (
                "@codebutler.researcher serde's current API?",
                true,
                Conversing,
                AskResearcher,
            ),
            (
                "@codebutler.coder fix it",
                true,
                Conversing,
                OtherRoles(vec!["coder".into()]),
            ),
            (
                "@codebutler.reviewer look",
                true,
                pending(),
                OtherRoles(vec!["reviewer".into()]),
            ),
            (
                "@codebutler.coder @codebutler.pm both",
                true,
                Conversing,
                AskPm,
            ),
            ("@codebutler.artist a logo", true, Conversing, AskArtist),
            (
                "@codebutler.artist a logo",
                true,
                run_ended.clone(),
                AskArtist,
            ),
            (
                "@codebutler.pm @codebutler.artist a logo and a plan",
                true,
                Conversing,
                AskPmThenArtist,
            ),
            // No drawing open: the words are the PM's.
            ("draw it", true, Conversing, AskPm),
        ];
        for (text, allowed, state, expected) in cases {
            assert_eq!(
                classify(&msg(text), &facts(allowed, &state)),
                expected,
                "{text:?} allowed={allowed} in {state:?}"
            );
        }
    }

    /// The words that answer an open drawing are the Artist's only while one is open, after
    /// a pending plan's approval and before the close words.
    #[test]
    fn an_open_drawing_takes_its_words() {
        let with = |stage| Facts {
            drawing: Some((3, stage)),
            ..facts(true, &ThreadState::Conversing)
        };
        let proposed = with(DrawingStage::Proposed);
        let drawn = with(DrawingStage::Drawn);
        assert_eq!(
            classify(&msg("draw it"), &proposed),
            Command::Draw { number: 3 }
        );
        assert_eq!(
            classify(&msg("cancel"), &proposed),
            Command::CancelDrawing { number: 3 }
        );
        assert_eq!(classify(&msg("use it"), &proposed), Command::AskPm);
        assert_eq!(
            classify(&msg("use it at docs/logo.png"), &drawn),
            Command::UseDrawing {
                number: 3,
                path: Some("docs/logo.png".into())
            }
        );
        assert_eq!(classify(&msg("again"), &drawn), Command::Draw { number: 3 });
        let outsider = Facts {
            developer: false,
            ..drawn.clone()
        };
        assert_eq!(
            classify(&msg("use it"), &outsider),
            Command::DevelopersOnly("put an image in the branch")
        );
        // A pending plan's approval comes first.
        let plan = Facts {
            drawing: Some((3, DrawingStage::Proposed)),
            ..facts(true, &pending())
        };
        assert_eq!(classify(&msg("yes"), &plan), Command::Approve);
        // The buttons of the proposal shown: only while that drawing waits to be drawn.
        let draw = stored(Origin::Click, &click(ButtonAction::DrawIt, "3"));
        let cancel = stored(Origin::Click, &click(ButtonAction::CancelDrawing, "3"));
        assert_eq!(classify(&draw, &proposed), Command::Draw { number: 3 });
        assert_eq!(
            classify(&cancel, &proposed),
            Command::CancelDrawing { number: 3 }
        );
        assert_eq!(classify(&draw, &drawn), Command::SpentClick);
        let earlier = stored(Origin::Click, &click(ButtonAction::DrawIt, "2"));
        assert_eq!(classify(&earlier, &proposed), Command::SpentClick);
    }

    /// A coordination notice is posted whatever the thread's state and allow-list (a
    /// running Coder does not take it); the same text typed by a person is not one.
    #[test]
    fn coordination_notices_are_posted_in_every_state() {
        let thread = crate::domain::ThreadKey {
            channel: "C1".into(),
            thread_ts: "1.1".into(),
        };
        let notice = crate::domain::notice_message(&thread, "1.3", "⚠️ both");
        for state in [
            ThreadState::Conversing,
            ThreadState::CoderRunning,
            ThreadState::Closed(Closure::Merged),
        ] {
            for allowed in [true, false] {
                assert_eq!(
                    classify(&notice, &facts(allowed, &state)),
                    Command::Notice("⚠️ both".into()),
                    "{state:?}"
                );
            }
        }
        assert_eq!(
            classify(&msg(&notice.text), &facts(true, &ThreadState::CoderRunning)),
            Command::ToRunningCoder
        );
    }

    /// What the PR watcher stored is judged by the thread's state, whoever the allow-list
    /// names.
    #[test]
    fn watcher_events() {
        let pr_open = ThreadState::RunEnded {
            last: Box::new(ended()),
            pr: Some(pr()),
        };
        for event in [PrEvent::Merged, PrEvent::Closed] {
            let text = event.to_text(7);
            for allowed in [true, false] {
                assert_eq!(
                    classify(&stored(Origin::Watcher, &text), &facts(allowed, &pr_open)),
                    Command::EndedOnGitHub { event, pr: pr() }
                );
            }
            for state in [
                ThreadState::CoderRunning,
                ThreadState::Closed(Closure::Merged),
                ThreadState::Conversing,
                ThreadState::RunEnded {
                    last: Box::new(ended()),
                    pr: None,
                },
            ] {
                assert_eq!(
                    classify(&stored(Origin::Watcher, &text), &facts(true, &state)),
                    Command::WatchLater,
                    "{state:?}"
                );
            }
        }
    }

    /// The watcher's review messages are judged by the thread's state; yes/no answer an open
    /// round only once the run ended with the pull request open.
    #[test]
    fn review_rounds() {
        let pr_open = ThreadState::RunEnded {
            last: Box::new(ended()),
            pr: Some(pr()),
        };
        let round = ReviewEvent::Round.to_text(7);
        let capped = ReviewEvent::Capped.to_text(7);
        let reviewer = ReviewEvent::Reviewer.to_text(7);
        for allowed in [true, false] {
            for state in [
                pr_open.clone(),
                ThreadState::CoderRunning,
                ThreadState::Conversing,
            ] {
                assert_eq!(
                    classify(&stored(Origin::Watcher, &round), &facts(allowed, &state)),
                    Command::ReviewRound
                );
                assert_eq!(
                    classify(&stored(Origin::Watcher, &capped), &facts(allowed, &state)),
                    Command::ReviewCapped
                );
                assert_eq!(
                    classify(&stored(Origin::Watcher, &reviewer), &facts(allowed, &state)),
                    Command::ReviewerDue
                );
            }
        }
        assert_eq!(
            classify(
                &stored(Origin::Watcher, &round),
                &facts(true, &ThreadState::Closed(Closure::Merged))
            ),
            Command::WatchLater
        );
        /// A message, whether its author is allowed, the open round, the state, the rule's word.
        type Case = (
            &'static str,
            bool,
            Option<i64>,
            ThreadState,
            Option<Command>,
        );
        let cases: Vec<Case> = vec![
            (
                "yes",
                true,
                Some(2),
                pr_open.clone(),
                Some(Command::ApproveReview {
                    round: 2,
                    last: Box::new(ended()),
                }),
            ),
            (
                "LGTM!",
                true,
                Some(2),
                pr_open.clone(),
                Some(Command::ApproveReview {
                    round: 2,
                    last: Box::new(ended()),
                }),
            ),
            (
                "no",
                true,
                Some(2),
                pr_open.clone(),
                Some(Command::DeclineReview { round: 2 }),
            ),
            ("yes", false, Some(2), pr_open.clone(), None),
            ("yes", true, None, pr_open.clone(), None),
            ("rename it instead", true, Some(2), pr_open.clone(), None),
            ("yes", true, Some(2), ThreadState::CoderRunning, None),
            (
                "yes",
                true,
                Some(2),
                ThreadState::RunEnded {
                    last: Box::new(ended()),
                    pr: None,
                },
                None,
            ),
        ];
        for (text, allowed, open, state, expected) in cases {
            assert_eq!(
                classify_review(&msg(text), allowed, open, &state),
                expected,
                "{text:?} allowed={allowed} open={open:?} in {state:?}"
            );
        }
        let click = click(ButtonAction::Approve, "d1");
        assert_eq!(classify_review(&msg(&click), true, Some(2), &pr_open), None);
    }

    #[test]
    fn questions_after_close() {
        let cases = [
            // A question mark, anywhere.
            ("what changed?", true),
            ("¿se desplegó?", true),
            ("it broke the build?!", true),
            // Addressed to the PM.
            ("@codebutler.pm the deploy step", true),
            ("<@U0BOT> @codebutler.pm list the files", true),
            // A question word first (case, punctuation and mentions aside).
            ("Why did it change the Makefile", true),
            ("how does the session expire", true),
            ("<@U0BOT> where is the config", true),
            ("@codebutler.coder what did you do", true),
            ("WHO approved this.", true),
            ("Did it pass CI", true),
            // Statements and requests.
            ("now rename it", false),
            ("thanks!", false),
            ("@codebutler.coder fix it", false),
            ("merge", false),
            ("yes", false),
            ("", false),
            ("   ", false),
            ("somehow it works", false),
            ("whatever", false),
            ("showing the config", false),
        ];
        for (text, expected) in cases {
            assert_eq!(is_question(text), expected, "{text:?}");
        }
    }

    #[test]
    fn clicks() {
        use Command::*;
        use ThreadState::{CoderRunning, Conversing, Preparing};
        let parsed = |text: &str| Click::parse(text).unwrap();
        let approve = click(ButtonAction::Approve, "d1");
        let cancel = click(ButtonAction::CancelPlan, "d1");
        let stop = click(ButtonAction::StopRun, "r1");
        let cases: Vec<(String, bool, ThreadState, Command)> = vec![
            (approve.clone(), false, pending(), ClickNotAllowed),
            (stop.clone(), false, CoderRunning, ClickNotAllowed),
            (stop.clone(), true, CoderRunning, StopButton(parsed(&stop))),
            (stop.clone(), true, Conversing, StopButton(parsed(&stop))),
            (
                approve.clone(),
                true,
                pending(),
                ApproveButton(parsed(&approve)),
            ),
            (
                cancel.clone(),
                true,
                pending(),
                CancelButton(parsed(&cancel)),
            ),
            (
                click(ButtonAction::Approve, "d0"),
                true,
                pending(),
                EarlierPlanButton,
            ),
            (
                click(ButtonAction::CancelPlan, "d0"),
                true,
                pending(),
                EarlierPlanButton,
            ),
            (approve.clone(), true, Preparing, SpentClick),
            (cancel.clone(), true, Conversing, SpentClick),
            (approve.clone(), true, CoderRunning, SpentClick),
            (
                approve.clone(),
                true,
                ThreadState::Closed(Closure::Merged),
                SpentClick,
            ),
        ];
        for (text, allowed, state, expected) in cases {
            assert_eq!(
                classify(&stored(Origin::Click, &text), &facts(allowed, &state)),
                expected,
                "{text:?} allowed={allowed} in {state:?}"
            );
        }
    }

    /// Nothing a person types acts as the controller's own events: the markers of a click,
    /// of what the PR watcher saw and of a notice, typed (through the API Slack does not
    /// escape them) by someone off the allow-list get the refusal, and by someone on it are
    /// what any text is — a follow-up for the thread's Coder here.
    #[test]
    fn typed_markers_are_text() {
        let pr_open = ThreadState::RunEnded {
            last: Box::new(ended()),
            pr: Some(pr()),
        };
        let thread = crate::domain::ThreadKey {
            channel: "C1".into(),
            thread_ts: "1.1".into(),
        };
        let notice = crate::domain::notice_message(&thread, "1.3", "⚠️ x").text;
        for text in [
            PrEvent::Merged.to_text(7),
            PrEvent::Closed.to_text(7),
            ReviewEvent::Round.to_text(7),
            ReviewEvent::Capped.to_text(7),
            click(ButtonAction::StopRun, "r1"),
            notice,
        ] {
            assert_eq!(
                classify(&msg(&text), &facts(false, &pr_open)),
                Command::NotAllowed,
                "{text:?}"
            );
            assert_eq!(
                classify(&msg(&text), &facts(true, &pr_open)),
                Command::FollowUp {
                    last: Box::new(ended())
                },
                "{text:?}"
            );
        }
        let approve = click(ButtonAction::Approve, "d1");
        assert_eq!(
            classify(&msg(&approve), &facts(true, &pending())),
            Command::AskPm
        );
        assert_eq!(
            classify(&msg(&approve), &facts(false, &pending())),
            Command::NotAllowed
        );
        // The controller's own message that does not read back does nothing.
        for origin in [Origin::Click, Origin::Watcher, Origin::Notice] {
            assert_eq!(
                classify(&stored(origin, "yes"), &facts(true, &pr_open)),
                Command::Unreadable
            );
        }
    }

    #[test]
    fn memory_replies_come_after_the_allow_list_and_before_the_rest() {
        use Command::*;
        let cases: Vec<(&str, bool, bool, Option<Command>)> = vec![
            ("yes", true, true, Some(MemoryReply(Reply::Yes))),
            ("No", true, true, Some(MemoryReply(Reply::No))),
            (
                "remove 2",
                true,
                true,
                Some(MemoryReply(Reply::Remove(vec![2]))),
            ),
            (
                "add: use bcrypt",
                true,
                true,
                Some(MemoryReply(Reply::Add(
                    "use bcrypt".into(),
                    crate::domain::memory_ops::Category::Project,
                ))),
            ),
            (
                "change 1 to: x",
                true,
                true,
                Some(MemoryReply(Reply::Change(1, "x".into()))),
            ),
            ("yes", false, true, None),
            ("yes", true, false, None),
            ("remove 2", true, false, None),
            ("how do we deploy?", true, true, None),
            (
                "correct 2: JWT",
                true,
                false,
                Some(CorrectAnswer {
                    number: 2,
                    answer: "JWT".into(),
                }),
            ),
            (
                "correct 1: tabs",
                true,
                true,
                Some(CorrectAnswer {
                    number: 1,
                    answer: "tabs".into(),
                }),
            ),
            ("correct 2: JWT", false, false, None),
        ];
        for (text, allowed, open, expected) in cases {
            assert_eq!(
                classify_memory(&msg(text), allowed, open),
                expected,
                "{text:?} allowed={allowed} open={open}"
            );
        }
        let click = click(ButtonAction::Approve, "d1");
        assert_eq!(
            classify_memory(&stored(Origin::Click, &click), true, true),
            None
        );
    }

    #[test]
    fn past_a_running_coder_the_thread_rules_apply() {
        let run_ended = ThreadState::RunEnded {
            last: Box::new(ended()),
            pr: None,
        };
        assert_eq!(
            classify_past_coder(&msg("go on"), &run_ended, None),
            Command::FollowUp {
                last: Box::new(ended())
            }
        );
        assert_eq!(
            classify_past_coder(&msg("yes"), &pending(), None),
            Command::Approve
        );
        assert_eq!(
            classify_past_coder(&msg("yes"), &ThreadState::CoderRunning, None),
            Command::AskPm
        );
        assert_eq!(
            classify_past_coder(
                &msg("go on"),
                &ThreadState::Closed(Closure::Abandoned),
                None
            ),
            Command::ThreadClosed
        );
        assert_eq!(
            classify_past_coder(
                &msg("what changed?"),
                &ThreadState::Closed(Closure::Merged),
                None
            ),
            Command::QuestionAfterClose
        );
    }

    #[test]
    fn rebase_needs_an_ended_run_and_no_running_coder() {
        use Command::*;
        use ThreadState::{CoderRunning, Conversing, Preparing};
        let run_ended = ThreadState::RunEnded {
            last: Box::new(ended()),
            pr: None,
        };
        let pr_open = ThreadState::RunEnded {
            last: Box::new(ended()),
            pr: Some(pr()),
        };
        let rebase = |pr| Rebase {
            last: Box::new(ended()),
            pr,
        };
        let cases: Vec<(&str, bool, ThreadState, Command)> = vec![
            ("rebase", true, pr_open.clone(), rebase(Some(pr()))),
            ("Rebase!", true, pr_open.clone(), rebase(Some(pr()))),
            (
                "<@U0BOT> update the branch",
                true,
                pr_open.clone(),
                rebase(Some(pr())),
            ),
            (
                "bring it up to date.",
                true,
                run_ended.clone(),
                rebase(None),
            ),
            ("rebase", false, pr_open.clone(), NotAllowed),
            ("rebase", true, CoderRunning, RebaseWhileCoderRuns),
            ("rebase", true, Preparing, RebaseWhileCoderRuns),
            ("rebase", true, pending(), RebaseWhilePlanPending),
            ("rebase", true, Conversing, NothingToRebase),
            (
                "rebase",
                true,
                ThreadState::Closed(Closure::Merged),
                ThreadClosed,
            ),
            // Not only the word: a follow-up for the Coder.
            (
                "rebase the parser on the new lexer",
                true,
                pr_open.clone(),
                FollowUp {
                    last: Box::new(ended()),
                },
            ),
        ];
        for (text, allowed, state, expected) in cases {
            assert_eq!(
                classify(&msg(text), &facts(allowed, &state)),
                expected,
                "{text:?} in {state:?}"
            );
        }
    }

    /// A command as one cell of the table.
    fn cell(command: &Command) -> String {
        use Command::*;
        let with_pr = |name: &str, pr: &Option<PullRequestRef>| match pr {
            Some(pr) => format!("{name} #{}", pr.number),
            None => name.to_owned(),
        };
        match command {
            ClickNotAllowed => "ClickNotAllowed".into(),
            StopButton(_) => "StopButton".into(),
            SpentClick => "SpentClick".into(),
            EarlierPlanButton => "EarlierPlanButton".into(),
            ApproveButton(_) => "ApproveButton".into(),
            CancelButton(_) => "CancelButton".into(),
            NotAllowed => "NotAllowed".into(),
            ThreadClosed => "ThreadClosed".into(),
            QuestionAfterClose => "QuestionAfterClose".into(),
            Undo => "Undo".into(),
            SetBudget(cap) => format!("SetBudget ${cap}"),
            StopCoder => "StopCoder".into(),
            ToRunningCoder => "ToRunningCoder".into(),
            CloseWhileCoderRuns => "CloseWhileCoderRuns".into(),
            Merge { pr, anyway } => format!(
                "Merge #{}{}",
                pr.number,
                if *anyway { " anyway" } else { "" }
            ),
            NothingToMerge => "NothingToMerge".into(),
            Abandon { pr } => with_pr("Abandon", pr),
            Done => "Done".into(),
            EndedOnGitHub { event, pr } => format!("EndedOnGitHub {event:?} #{}", pr.number),
            WatchLater => "WatchLater".into(),
            Approve => "Approve".into(),
            AlreadyCarriedOut => "AlreadyCarriedOut".into(),
            FollowUp { .. } => "FollowUp".into(),
            OtherRoles(named) => {
                let names: Vec<&str> = named.iter().map(|m| m.name()).collect();
                format!("OtherRoles {}", names.join(","))
            }
            AskPm => "AskPm".into(),
            AskArtist => "AskArtist".into(),
            AskPmThenArtist => "AskPmThenArtist".into(),
            Draw { number } => format!("Draw {number}"),
            UseDrawing { number, path } => format!("UseDrawing {number} {path:?}"),
            CancelDrawing { number } => format!("CancelDrawing {number}"),
            AskResearcher => "AskResearcher".into(),
            ReviewRound => "ReviewRound".into(),
            ReviewCapped => "ReviewCapped".into(),
            ReviewerDue => "ReviewerDue".into(),
            ApproveReview { round, .. } => format!("ApproveReview {round}"),
            DeclineReview { round } => format!("DeclineReview {round}"),
            MemoryReply(reply) => format!("MemoryReply {reply:?}"),
            CorrectAnswer { number, .. } => format!("CorrectAnswer {number}"),
            Rebase { pr, .. } => with_pr("Rebase", pr),
            RebaseWhileCoderRuns => "RebaseWhileCoderRuns".into(),
            RebaseWhilePlanPending => "RebaseWhilePlanPending".into(),
            NothingToRebase => "NothingToRebase".into(),
            Notice(_) => "Notice".into(),
            Unreadable => "Unreadable".into(),
            DevelopersOnly(what) => format!("DevelopersOnly {what:?}"),
        }
    }

    /// The whole rule table, one function of the message and the thread's facts: every kind
    /// of message (typed words, clicks, the PR watcher's, a notice) × every thread state,
    /// with the author on the allow-list or not, a review round and a memory proposal open
    /// or not, and the running Coder missing it (its run ended as the message came). The
    /// rendered table is a reviewed snapshot: a new trigger or role is a new row of it.
    #[test]
    fn the_rule_table() {
        let thread = ThreadKey {
            channel: "C1".into(),
            thread_ts: "1.1".into(),
        };
        let states = [
            ("conversing", ThreadState::Conversing),
            ("plan pending", pending()),
            ("preparing", ThreadState::Preparing),
            ("coder running", ThreadState::CoderRunning),
            (
                "run ended",
                ThreadState::RunEnded {
                    last: Box::new(ended()),
                    pr: None,
                },
            ),
            (
                "pr open",
                ThreadState::RunEnded {
                    last: Box::new(ended()),
                    pr: Some(pr()),
                },
            ),
            ("closed", ThreadState::Closed(Closure::Merged)),
        ];
        let typed = |text: &str| (format!("{text:?}"), msg(text));
        let messages = vec![
            typed("how do we deploy?"),
            typed("now rename it"),
            typed("@codebutler.artist a logo"),
            typed("@codebutler.pm @codebutler.artist a logo and a plan"),
            typed("yes"),
            typed("no"),
            typed("stop"),
            typed("undo"),
            typed("budget $5"),
            typed("merge"),
            typed("done"),
            typed("abandon"),
            typed("rebase"),
            typed("remove 2"),
            typed("correct 2: JWT"),
            typed("@codebutler.pm what changed"),
            typed("@codebutler.coder fix it"),
            typed("@codebutler.reviewer look"),
            (
                "click Approve".into(),
                stored(Origin::Click, &click(ButtonAction::Approve, "d1")),
            ),
            (
                "click Cancel".into(),
                stored(Origin::Click, &click(ButtonAction::CancelPlan, "d1")),
            ),
            (
                "click Approve, earlier plan".into(),
                stored(Origin::Click, &click(ButtonAction::Approve, "d0")),
            ),
            (
                "click Stop".into(),
                stored(Origin::Click, &click(ButtonAction::StopRun, "r1")),
            ),
            (
                "watcher: merged".into(),
                stored(Origin::Watcher, &PrEvent::Merged.to_text(7)),
            ),
            (
                "watcher: closed".into(),
                stored(Origin::Watcher, &PrEvent::Closed.to_text(7)),
            ),
            (
                "watcher: review round".into(),
                stored(Origin::Watcher, &ReviewEvent::Round.to_text(7)),
            ),
            (
                "watcher: rounds capped".into(),
                stored(Origin::Watcher, &ReviewEvent::Capped.to_text(7)),
            ),
            (
                "notice".into(),
                crate::domain::notice_message(&thread, "1.3", "⚠️ both"),
            ),
            (
                "typed watcher marker".into(),
                msg(&PrEvent::Merged.to_text(7)),
            ),
            ("unreadable click".into(), stored(Origin::Click, "yes")),
            ("unreadable watcher".into(), stored(Origin::Watcher, "yes")),
            ("unreadable notice".into(), stored(Origin::Notice, "yes")),
        ];
        // The facts besides the state: on the allow-list, a developer, round open, proposal
        // open, missed by the running Coder.
        type Variant = (&'static str, bool, bool, Option<i64>, bool, bool);
        let variants: [Variant; 7] = [
            ("", true, true, None, false, false),
            ("round 2 open", true, true, Some(2), false, false),
            ("proposal open", true, true, None, true, false),
            ("round and proposal", true, true, Some(2), true, false),
            ("off the allow-list", false, false, Some(2), true, false),
            ("not a developer", true, false, Some(2), true, false),
            ("coder missed it", true, true, None, false, true),
        ];
        let mut rows = vec![
            std::iter::once("message".to_owned())
                .chain(std::iter::once("facts".to_owned()))
                .chain(states.iter().map(|(name, _)| (*name).to_owned()))
                .collect::<Vec<_>>(),
        ];
        for (name, message) in &messages {
            for (variant, allowed, developer, open_round, proposal_open, coder_missed) in variants {
                let mut row = vec![name.clone(), variant.to_owned()];
                for (_, state) in &states {
                    let facts = Facts {
                        allowed,
                        developer,
                        state: state.clone(),
                        open_round,
                        proposal_open,
                        coder_missed,
                        drawing: None,
                    };
                    row.push(cell(&classify(message, &facts)));
                }
                rows.push(row);
            }
        }
        let widths: Vec<usize> = (0..rows[0].len())
            .map(|i| rows.iter().map(|r| r[i].chars().count()).max().unwrap_or(0))
            .collect();
        let table: Vec<String> = rows
            .iter()
            .map(|row| {
                let cells: Vec<String> = row
                    .iter()
                    .zip(&widths)
                    .map(|(cell, width)| format!("{cell:width$}"))
                    .collect();
                cells.join(" | ").trim_end().to_owned()
            })
            .collect();
        insta::assert_snapshot!(table.join("\n"));
    }
}
