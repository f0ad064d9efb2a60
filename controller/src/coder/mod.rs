//! The Coder in a Slack thread: an approved plan becomes a run in a fresh worktree, and the
//! run's progress lives in one status message edited in place (at most every 10 s: turn,
//! what the Coder is doing now, elapsed time, tokens, cost). 👀 on the approval while it
//! runs, then ✅ or ❌, and a short summary of how it ended.
//!
//! Everything said in the thread goes through the outbox ([`crate::slack::outbox`]). A run's
//! status message and its end are named groups there (`status:<run>`, `end:<run>`), and the
//! end is recorded with the run's `reported` mark ([`Change::RunReported`]): the follower
//! reports it, or, when a crash took the follower, the next start does, exactly once either
//! way ([`SlackCoder::report_unreported_runs`]).

use std::path::PathBuf;
use std::time::Duration;

use codebutler_proto::runner::v1::runner_event::Event;
use prost::Message;
use tokio::sync::broadcast::error::RecvError;
use tokio::sync::{broadcast, watch};
use tokio::time::Instant;

use crate::admin::server::CLI_CHANNEL;
use crate::domain::Plan;
use crate::domain::{IncomingMessage, RunRecord, RunState};
use crate::layout::Layout;
use crate::pm::Pm;
use crate::runners::resume::resume_with;
use crate::runners::supervisor::{Resume, RunEvent, RunRequest, Supervisor};
use crate::slack::effects::{Effect, Effects, MessageRef};
use crate::slack::format::escape_text;
use crate::slack::outbox::Outbox;
use crate::store::{Change, Store};
use crate::workspace::{checkpoint, forge, worktree};

/// Least time between two edits of a status message.
pub const STATUS_INTERVAL: Duration = Duration::from_secs(10);
const PREFIX: &str = "*Coder:* ";
/// What a run the controller's restart cut off says in its thread.
const INTERRUPTED: &str = "I was stopped while working on this (the CodeButler service restarted). Say **continue** to pick up where I left off, or **undo** to drop what I changed.";

/// The outbox group of a run's status message: 👀 on the message that started the run,
/// then the status message.
fn status_group(run_id: &str) -> String {
    format!("status:{run_id}")
}

/// The outbox group reporting a run's end.
fn end_group(run_id: &str) -> String {
    format!("end:{run_id}")
}

/// The outbox group announcing the pull request of the run's event `seq`.
fn pull_request_group(run_id: &str, seq: i64) -> String {
    format!("pr:{run_id}:{seq}")
}

/// The line announcing a pull request (the address, from the forge, made inert).
fn pull_request_line(url: &str) -> String {
    format!("{PREFIX}opened a pull request: {}", escape_text(url))
}

/// Why a run could not be started.
#[derive(Clone, Debug, PartialEq)]
pub struct StartFailure {
    pub reason: String,
    /// The run, if one was recorded before the start failed (it never began; whoever
    /// reports the failure reports its end).
    pub run: Option<String>,
}

impl StartFailure {
    fn before_run(reason: impl ToString) -> Self {
        Self {
            reason: reason.to_string(),
            run: None,
        }
    }
}

/// What "undo" did: the reply, and the store's side of it when the worktree was restored.
#[derive(Clone, Debug, PartialEq)]
pub struct Undo {
    pub reply: String,
    pub undone: Option<Undone>,
}

/// What an undo changes in the store (see [`Change::Undone`]).
#[derive(Clone, Debug, PartialEq)]
pub struct Undone {
    pub checkpoint_run: String,
    pub latest_run: Option<String>,
    pub conversation: String,
}

/// Starts and reports Coder runs for Slack threads.
#[derive(Clone, Debug)]
pub struct SlackCoder {
    pub supervisor: Supervisor,
    pub layout: Layout,
    pub outbox: Outbox,
    pub store: Store,
    /// Fetches, creates and prepares the worktree of an approved plan.
    pub prepare: worktree::Preparer,
    /// Answers the Coder's questions first (see [`crate::pm::questions`]).
    pub pm: Pm,
}

impl SlackCoder {
    /// Starts the run of an approved plan (stored JSON) in a fresh worktree, posts its
    /// status message and follows it in the background.
    pub async fn start(
        &self,
        approval: &IncomingMessage,
        plan_json: &str,
    ) -> Result<(), StartFailure> {
        let plan: Plan = serde_json::from_str(plan_json)
            .map_err(|e| StartFailure::before_run(format!("read the plan: {e}")))?;
        let plan_text = plan.to_markdown();
        let progress = ThreadProgress {
            outbox: &self.outbox,
            approval,
        };
        let tree = self
            .prepare
            .create(&plan.summary, &progress)
            .await
            .map_err(StartFailure::before_run)?;
        // The runner starts (process, sandbox, hub) while the worktree is prepared; it gets
        // its task, and the Coder its first step, only once the preparation succeeded.
        let (ready, ready_rx) = watch::channel(false);
        let (run, events) = match self
            .begin(approval, plan_text, &tree, None, Some(ready_rx))
            .await
        {
            Ok(started) => started,
            Err(e) => {
                self.remove_worktree(&tree).await;
                return Err(StartFailure::before_run(e));
            }
        };
        if let Err(e) = self.prepare.init_or_remove(&tree, &progress).await {
            let reason = "the worktree could not be prepared";
            self.supervisor.cancel(&approval.thread_ts, reason).await;
            return Err(StartFailure {
                reason: e.to_string(),
                run: Some(run.id),
            });
        }
        if ready.send(true).is_err() {
            tracing::warn!(thread = %approval.thread(), "run {} ended before its worktree was ready", run.id);
        }
        self.follow(approval, &tree, run, events).await;
        Ok(())
    }

    /// Starts a run that goes on from the thread's last run `last`, in its worktree and
    /// branch, with `msg` (a follow-up, "continue" or anything said after "undo") added to
    /// the stored conversation.
    pub async fn resume(&self, msg: &IncomingMessage, last: &RunRecord) -> Result<(), String> {
        let path = PathBuf::from(&last.worktree);
        if !path.is_dir() {
            let shown = path.strip_prefix(&self.layout.repo).unwrap_or(&path);
            return Err(format!("its worktree {} is gone", shown.display()));
        }
        let branch = if last.branch.is_empty() {
            let tree = path.clone();
            tokio::task::spawn_blocking(move || forge::worktree_branch(&tree))
                .await
                .map_err(|e| e.to_string())?
                .map_err(|e| e.to_string())?
        } else {
            last.branch.clone()
        };
        let conversation = self.stored_conversation(last).await?;
        let message = follow_up_message(msg);
        let resumed = resume_with(&conversation, &message).map_err(|e| e.to_string())?;
        let tree = worktree::Worktree { path, branch };
        let resume = Resume {
            conversation,
            message,
        };
        let (run, events) = self
            .begin(msg, last.plan.clone(), &tree, Some(resume), None)
            .await?;
        // Until its first model call stores the run's conversation, it is the one it was
        // given with the new message: what "continue" resumes if the run dies before.
        if let Err(e) = self.store.seed_run_conversation(&run.id, &resumed).await {
            tracing::warn!(run = %run.id, "record the conversation the run starts from: {e}");
        }
        self.follow(msg, &tree, run, events).await;
        Ok(())
    }

    /// For a follow-up whose run was recorded just before a crash, before the run's
    /// conversation was: gives the run the conversation it was started with.
    pub async fn seed_cut_off_follow_up(&self, msg: &IncomingMessage, run_id: &str) {
        let seeded = async {
            let Some(run) = self.store.run(run_id).await.map_err(|e| e.to_string())? else {
                return Ok(());
            };
            let Some(before) = self
                .store
                .run_before(&run)
                .await
                .map_err(|e| e.to_string())?
            else {
                return Ok(());
            };
            let given = self.stored_conversation(&before).await?;
            let resumed =
                resume_with(&given, &follow_up_message(msg)).map_err(|e| e.to_string())?;
            self.store
                .seed_run_conversation(run_id, &resumed)
                .await
                .map_err(|e| e.to_string())
        };
        if let Err(e) = seeded.await {
            tracing::warn!(
                run = run_id,
                "record the conversation of a run cut off at its start: {e}"
            );
        }
    }

    /// The thread's last run, when it has ended and a new message should go on from it: the
    /// thread's plan was used (phase `coder`) and no run is in progress.
    pub async fn ended_run(&self, msg: &IncomingMessage) -> Option<RunRecord> {
        let thread = msg.thread();
        if self.supervisor.is_active(&thread.thread_ts) {
            return None;
        }
        match self.store.phase(&thread).await {
            Ok(Some(phase)) if phase == "coder" => {}
            _ => return None,
        }
        let last = self.store.latest_run(&thread.thread_ts).await.ok()??;
        (last.thread == thread && last.state.is_final()).then_some(last)
    }

    /// "undo": puts the worktree back to the checkpoint taken before the thread's last run.
    /// Returns the reply and, when the worktree was restored, what the store must record
    /// with it: the checkpoint dropped and that run's conversation the one the next run
    /// resumes. Restoring the same checkpoint twice (a crash before the record) gives the
    /// same worktree, so nothing is undone twice.
    pub async fn undo(&self, msg: &IncomingMessage) -> Undo {
        let thread = msg.thread();
        let only = |reply: String| Undo {
            reply,
            undone: None,
        };
        if self.supervisor.is_active(&thread.thread_ts) {
            return only("I'm still working: say **stop** first, then **undo**.".into());
        }
        let checkpoint = match self.store.latest_checkpoint(&thread).await {
            Ok(Some(c)) => c,
            Ok(None) => return only("There is nothing to undo in this thread.".into()),
            Err(e) => return only(format!("I couldn't read this thread's checkpoints ({e}).")),
        };
        let latest_run = match self.store.latest_run(&thread.thread_ts).await {
            Ok(latest) => latest.map(|r| r.id),
            Err(e) => return only(format!("I couldn't read this thread's runs ({e}).")),
        };
        let snapshot = checkpoint::Snapshot {
            tree: checkpoint.tree_sha.clone(),
            head: checkpoint.head_sha.clone(),
        };
        let path = PathBuf::from(&checkpoint.worktree);
        if let Err(e) = self.prepare.ensure_mounted(&path).await {
            return only(format!("I couldn't undo: {e}. Nothing was changed."));
        }
        let (helper, main) = (self.prepare.helper(&path), self.layout.repo.clone());
        let restored = tokio::task::spawn_blocking(move || {
            checkpoint::restore(&helper, &main, &path, &snapshot)
        })
        .await;
        let restored = match restored {
            Ok(Ok(restored)) => restored,
            Ok(Err(e)) => return only(format!("I couldn't undo: {e}.")),
            Err(e) => return only(format!("I couldn't undo: {e}.")),
        };
        tracing::info!(
            tag = "CLD",
            "thread {thread} → undid run {}",
            checkpoint.run_id
        );
        let short = checkpoint.head_sha.get(..7).unwrap_or_default();
        let mut reply =
            String::from("Undone: the worktree is back to where it was before my last run.");
        match restored.head {
            checkpoint::Head::MovedBack => {
                reply.push_str(&format!(" The branch is back at `{short}`."));
            }
            checkpoint::Head::KeptPushed => reply.push_str(
                " Its commits were already pushed, so they stay: the reverted files are uncommitted changes, and my next commit records them.",
            ),
            checkpoint::Head::Unchanged => {}
        }
        reply.push_str(" Tell me what to do instead.");
        Undo {
            reply,
            undone: Some(Undone {
                checkpoint_run: checkpoint.run_id,
                latest_run,
                conversation: checkpoint.conversation,
            }),
        }
    }

    /// Reports the end of every run whose end was not reported: runs the last controller
    /// left running (interrupted at start), and runs that ended while it was going down.
    pub async fn report_unreported_runs(&self) {
        match self.store.unreported_runs(CLI_CHANNEL).await {
            Ok(runs) => {
                for run in runs {
                    self.report_end(&run.id).await;
                }
            }
            Err(e) => tracing::error!("read runs whose end was not reported: {e}"),
        }
    }

    /// Reports how the run ended in its thread, once: its status message's final line, the
    /// summary (the Coder's last words, or why it stopped), ✅ or ❌ on what started it.
    pub async fn report_end(&self, run_id: &str) {
        let run = match self.store.run(run_id).await {
            Ok(Some(run)) if run.state.is_final() => run,
            Ok(Some(_)) => {
                tracing::warn!(run = run_id, "not reporting a run that has not ended");
                return;
            }
            Ok(None) => {
                tracing::warn!(run = run_id, "no such run to report");
                return;
            }
            Err(e) => {
                tracing::error!(run = run_id, "read the run to report its end: {e}");
                return;
            }
        };
        let story = self.story(run_id).await;
        let mut unannounced = Vec::new();
        for (seq, url) in story.pull_requests {
            match self
                .store
                .intent_group(&pull_request_group(run_id, seq))
                .await
            {
                Ok(rows) if rows.is_empty() => unannounced.push(url),
                Ok(_) => {}
                Err(e) => tracing::warn!(run = run_id, "read the pull request link: {e}"),
            }
        }
        let status = match self.store.intent_group(&status_group(run_id)).await {
            Ok(rows) => rows,
            Err(e) => {
                tracing::warn!(run = run_id, "read the run's status message: {e}");
                Vec::new()
            }
        };
        let mut approval_ts = None;
        let mut status_post = None;
        for row in &status {
            match serde_json::from_str::<Effect>(&row.body) {
                Ok(Effect::React { ts, .. }) => approval_ts = Some(ts),
                Ok(Effect::Post { .. }) => status_post = Some(row.id.clone()),
                _ => {}
            }
        }
        let effects = end_effects(
            &run,
            &story.last_text,
            &unannounced,
            status_post.as_deref(),
            approval_ts.as_deref(),
        );
        match self
            .outbox
            .commit(&[Change::RunReported(run_id)], &effects)
            .await
        {
            Ok(true) => {
                tracing::info!(tag = "CLD", "thread {} → run {run_id} reported", run.thread)
            }
            Ok(false) => tracing::debug!(run = run_id, "run end reported already"),
            Err(e) => tracing::error!(run = run_id, "record the run's end: {e}"),
        }
    }

    /// What the run's recorded events tell its end report: the Coder's last words and the
    /// pull requests it opened.
    async fn story(&self, run_id: &str) -> Story {
        let mut story = Story::default();
        let events = match self.store.run_events(run_id, 0).await {
            Ok(events) => events,
            Err(e) => {
                tracing::warn!(run = run_id, "read the run's events: {e}");
                return story;
            }
        };
        for (seq, body) in events {
            match codebutler_proto::runner::v1::RunnerEvent::decode(body.as_slice()) {
                Ok(recorded) => match recorded.event {
                    Some(Event::AssistantText(a)) => story.last_text = a.text,
                    Some(event) => {
                        if let Some(url) = pull_request_url(&event) {
                            story.pull_requests.push((seq, url));
                        }
                    }
                    None => {}
                },
                Err(e) => tracing::warn!(run = run_id, "stored event {seq}: {e}"),
            }
        }
        story
    }

    /// The conversation `last` left: the one kept at its latest model call, else the one
    /// it was given (it made no call), else its plan.
    async fn stored_conversation(&self, last: &RunRecord) -> Result<String, String> {
        if let Some(stored) = self
            .store
            .run_conversation(&last.id)
            .await
            .map_err(|e| e.to_string())?
        {
            return Ok(stored);
        }
        let checkpoint = self
            .store
            .latest_checkpoint(&last.thread)
            .await
            .map_err(|e| e.to_string())?;
        match checkpoint {
            Some(c) if c.run_id == last.id => Ok(c.conversation),
            _ => serde_json::to_string(&[codebutler_agent::conversation::plan_message(&last.plan)])
                .map_err(|e| e.to_string()),
        }
    }

    /// Starts a run in `tree` for the thread of `approval` (the message that asked for it);
    /// returns it with a receiver of the runs' events, subscribed before it started.
    async fn begin(
        &self,
        approval: &IncomingMessage,
        plan: String,
        tree: &worktree::Worktree,
        resume: Option<Resume>,
        ready: Option<watch::Receiver<bool>>,
    ) -> Result<(RunRecord, broadcast::Receiver<RunEvent>), String> {
        let events = self.supervisor.subscribe();
        let run = self
            .supervisor
            .start(RunRequest {
                thread: approval.thread(),
                plan,
                worktree: tree.path.clone(),
                branch: tree.branch.clone(),
                thread_link: Some(forge::thread_link(&approval.channel, &approval.thread_ts)),
                system_prompt: crate::prompts::coder_system_prompt(&self.layout),
                resume,
                ready,
            })
            .await
            .map_err(|e| e.to_string())?;
        Ok((run, events))
    }

    /// Removes a worktree no run was recorded for.
    async fn remove_worktree(&self, tree: &worktree::Worktree) {
        if let Err(e) = worktree::remove(&self.layout.repo, tree).await {
            tracing::warn!("remove a worktree no run uses: {e}");
        }
    }

    /// Posts the run's status message (and 👀 on `approval`) and follows the run in the
    /// background.
    async fn follow(
        &self,
        approval: &IncomingMessage,
        tree: &worktree::Worktree,
        run: RunRecord,
        events: broadcast::Receiver<RunEvent>,
    ) {
        let status = Status {
            summary: plan_summary(&run.plan),
            branch: tree.branch.clone(),
            max_turns: u32::try_from(run.max_turns).unwrap_or(0),
            ..Status::default()
        };
        let first = status.render(Duration::ZERO);
        let effects = Effects::named(status_group(&run.id), &approval.thread())
            .react(&approval.ts, "eyes")
            .post_with_blocks(&first, crate::slack::interactive::status_blocks(&first));
        if let Err(e) = self.outbox.send(&effects).await {
            tracing::error!(thread = %approval.thread(), "record the status message: {e}");
        }
        let follower = Follower {
            coder: self.clone(),
            run_id: run.id,
            approval: approval.clone(),
            status_id: effects.id(1),
            status_ts: None,
            status,
        };
        tokio::spawn(follower.run(events));
    }
}

/// What a run's events tell its end report.
#[derive(Debug, Default)]
struct Story {
    last_text: String,
    /// Pull requests opened, with the seq of their event.
    pull_requests: Vec<(i64, String)>,
}

/// How a follow-up reaches the Coder: who said what.
fn follow_up_message(msg: &IncomingMessage) -> String {
    format!("<@{}>: {}", msg.user, msg.text)
}

/// A plan's one-line summary: the first line of its text, without the "📋 Plan:" label.
fn plan_summary(plan: &str) -> String {
    let line = plan.lines().next().unwrap_or_default();
    line.strip_prefix("📋 **Plan:** ")
        .unwrap_or(line)
        .to_owned()
}

/// Whether the run did what it was asked.
fn succeeded(run: &RunRecord) -> bool {
    run.state == RunState::Finished
        && run
            .ending
            .as_deref()
            .is_some_and(|e| e.starts_with("completed"))
}

/// How long the run ran, from its start (or creation) to its end.
fn run_elapsed(run: &RunRecord) -> Duration {
    let parse = |t: &str| chrono::DateTime::parse_from_rfc3339(t).ok();
    let begun = run
        .started_at
        .as_deref()
        .and_then(parse)
        .or_else(|| parse(&run.created_at));
    match (begun, run.ended_at.as_deref().and_then(parse)) {
        (Some(begun), Some(ended)) => (ended - begun).to_std().unwrap_or_default(),
        _ => Duration::ZERO,
    }
}

/// The status message's last text.
fn final_status(run: &RunRecord) -> String {
    format!(
        "{PREFIX}{} _{}_ in `{}` · {} turns · {} · {} tokens · ${:.2}",
        if succeeded(run) {
            "finished"
        } else {
            "stopped"
        },
        escape_text(&plan_summary(&run.plan)),
        escape_text(&run.branch),
        run.turns,
        elapsed_text(run_elapsed(run)),
        run.prompt_tokens + run.completion_tokens,
        run.cost
    )
}

/// What the thread is told when the run ended: the Coder's last words if it did its work,
/// else why it stopped and how to go on.
fn end_summary(run: &RunRecord, last_text: &str) -> String {
    if run.state == RunState::Interrupted {
        return INTERRUPTED.to_owned();
    }
    let ending = run
        .ending
        .clone()
        .unwrap_or_else(|| run.state.as_str().to_owned());
    if succeeded(run) && !last_text.is_empty() {
        return last_text.to_owned();
    }
    let mut summary =
        crate::thread::budget::plain_ending(&ending).unwrap_or_else(|| format!("{ending}."));
    if !succeeded(run) {
        summary.push_str(
            "\n\nSay **continue** to pick up where I stopped, or **undo** to drop what I changed.",
        );
    }
    summary
}

/// The effects reporting a run's end: the status message's final line (when it was
/// posted), the links of pull requests nobody announced (the follower died first), the
/// summary, and ✅ or ❌ on the message that started the run (when known).
fn end_effects(
    run: &RunRecord,
    last_text: &str,
    unannounced: &[String],
    status_post: Option<&str>,
    approval_ts: Option<&str>,
) -> Effects {
    let mut effects = Effects::named(end_group(&run.id), &run.thread);
    if let Some(post) = status_post {
        let text = final_status(run);
        effects = effects.update(
            MessageRef::Post(post.to_owned()),
            &text,
            crate::slack::interactive::sections(&text),
        );
    }
    for url in unannounced {
        effects = effects.push(Effect::Post {
            text: pull_request_line(url),
            blocks: None,
        });
    }
    effects = effects.reply(&end_summary(run, last_text), PREFIX);
    if let Some(ts) = approval_ts {
        let reaction = if succeeded(run) {
            "white_check_mark"
        } else {
            "x"
        };
        effects = effects.react(ts, reaction);
    }
    effects
}

/// What the status message shows.
#[derive(Clone, Debug, Default, PartialEq)]
struct Status {
    summary: String,
    branch: String,
    turn: u32,
    max_turns: u32,
    doing: String,
    tokens: u64,
    cost: f64,
}

impl Status {
    fn apply(&mut self, event: &Event) {
        match event {
            Event::TurnBegun(t) => {
                self.turn = t.turn;
                self.max_turns = t.max_turns;
                self.doing = "thinking".into();
            }
            Event::ToolStarted(t) => self.doing = t.summary.clone(),
            Event::Usage(u) => {
                self.tokens += u.prompt_tokens + u.completion_tokens;
                self.cost += u.cost_usd;
            }
            _ => {}
        }
    }

    /// The status text; the plan's title and the Coder's activity are model text, made
    /// inert.
    fn render(&self, elapsed: Duration) -> String {
        let mut line = format!(
            "{PREFIX}working on _{}_ in `{}`\n",
            escape_text(&self.summary),
            escape_text(&self.branch)
        );
        if self.turn == 0 {
            line.push_str("starting the sandbox…");
        } else {
            line.push_str(&format!(
                "turn {} of {} · {} · {} · {} tokens · ${:.2}",
                self.turn,
                self.max_turns,
                escape_text(&self.doing),
                elapsed_text(elapsed),
                self.tokens,
                self.cost
            ));
        }
        line
    }
}

/// The URL of a pull request the Coder just opened, from its OpenPR tool's result.
fn pull_request_url(event: &Event) -> Option<String> {
    let Event::ToolFinished(f) = event else {
        return None;
    };
    if f.tool != "OpenPR" || f.is_error {
        return None;
    }
    f.summary
        .split_whitespace()
        .find(|w| w.starts_with("https://") || w.starts_with("http://"))
        .map(|w| w.trim_end_matches(['…', '.', ',']).to_owned())
}

fn elapsed_text(d: Duration) -> String {
    let secs = d.as_secs();
    if secs >= 60 {
        format!("{}m {:02}s", secs / 60, secs % 60)
    } else {
        format!("{secs}s")
    }
}

struct Follower {
    coder: SlackCoder,
    run_id: String,
    approval: IncomingMessage,
    /// The outbox id of the status message; its ts once known.
    status_id: String,
    status_ts: Option<String>,
    status: Status,
}

impl Follower {
    async fn run(mut self, mut events: tokio::sync::broadcast::Receiver<RunEvent>) {
        let started = Instant::now();
        let mut last_edit = Instant::now();
        let mut dirty = false;
        let mut tick = tokio::time::interval(Duration::from_secs(1));
        // The next event this follower has not seen (events are numbered from 0).
        let mut next_seq = 0;
        loop {
            tokio::select! {
                event = events.recv() => match event {
                    Ok(e) if e.run_id != self.run_id => {}
                    Ok(e) => {
                        if e.ended.is_some() {
                            break;
                        }
                        if e.seq < next_seq {
                            continue; // already read from the store after a lag
                        }
                        next_seq = e.seq + 1;
                        if let Some(event) = &e.event.event {
                            self.on_event(e.seq, event).await;
                            dirty = true;
                        }
                    }
                    Err(RecvError::Lagged(missed)) => {
                        tracing::warn!(run = %self.run_id, "status follower missed {missed} events; reading them from the store");
                        dirty = true;
                        if self.catch_up(&mut next_seq).await {
                            break;
                        }
                    }
                    Err(RecvError::Closed) => break,
                },
                _ = tick.tick() => {
                    if dirty && last_edit.elapsed() >= STATUS_INTERVAL {
                        self.edit(started.elapsed()).await;
                        last_edit = Instant::now();
                        dirty = false;
                    }
                }
            }
        }
        // A run still going here lost its supervisor: it is reported at the next start.
        self.coder.report_end(&self.run_id).await;
    }

    /// What one event of the run means for the thread: the status, a PR link, a notice, a
    /// question for the PM or the people.
    async fn on_event(&mut self, seq: i64, event: &Event) {
        self.status.apply(event);
        if let Some(url) = pull_request_url(event) {
            let group = pull_request_group(&self.run_id, seq);
            let effects = Effects::named(group, &self.approval.thread()).push(Effect::Post {
                text: pull_request_line(&url),
                blocks: None,
            });
            if let Err(e) = self.coder.outbox.send(&effects).await {
                tracing::warn!(thread = %self.approval.thread(), "record the pull request link: {e}");
            }
        }
        if let Event::Notice(notice) = event {
            let effects = Effects::new(&self.approval.thread()).reply(&notice.text, PREFIX);
            if let Err(e) = self.coder.outbox.send(&effects).await {
                tracing::warn!(thread = %self.approval.thread(), "record the notice: {e}");
            }
        }
        if let Event::Question(question) = event {
            tokio::spawn(crate::pm::questions::handle_question(
                self.coder.clone(),
                self.run_id.clone(),
                self.approval.clone(),
                question.clone(),
            ));
        }
    }

    /// After the broadcast dropped events (a slow Slack, a busy machine): reads them from
    /// the store, where the supervisor records every event before broadcasting it, so no
    /// question or PR link is lost. Returns whether the run ended meanwhile.
    async fn catch_up(&mut self, next_seq: &mut i64) -> bool {
        let store = self.coder.store.clone();
        match store.run_events(&self.run_id, *next_seq).await {
            Ok(missed) => {
                for (seq, body) in missed {
                    *next_seq = seq + 1;
                    match codebutler_proto::runner::v1::RunnerEvent::decode(body.as_slice()) {
                        Ok(recorded) => {
                            if let Some(event) = &recorded.event {
                                self.on_event(seq, event).await;
                            }
                        }
                        Err(e) => tracing::warn!(run = %self.run_id, "stored event {seq}: {e}"),
                    }
                }
            }
            Err(e) => tracing::error!(run = %self.run_id, "read missed events: {e}"),
        }
        matches!(store.run(&self.run_id).await, Ok(Some(run)) if run.state.is_final())
    }

    /// Edits the live status message in place. Not through the outbox: the next edit or the
    /// run's end supersedes a lost one.
    async fn edit(&mut self, elapsed: Duration) {
        if self.status_ts.is_none() {
            self.status_ts = self.coder.outbox.posted(&self.status_id).await;
        }
        let Some(ts) = &self.status_ts else {
            return;
        };
        let text = self.status.render(elapsed);
        if let Err(e) = self
            .coder
            .outbox
            .sender()
            .update_blocks(
                &self.approval.channel,
                ts,
                &text,
                crate::slack::interactive::status_blocks(&text),
            )
            .await
        {
            tracing::warn!(thread = %self.approval.thread(), "update status: {e}");
        }
    }
}

/// Worktree preparation's progress as `*Coder:*` lines in the approval's thread, and ❌ on
/// the approval when it fails.
struct ThreadProgress<'a> {
    outbox: &'a Outbox,
    approval: &'a IncomingMessage,
}

impl ThreadProgress<'_> {
    async fn send(&self, effects: Effects, what: &str) {
        if let Err(e) = self.outbox.send(&effects).await {
            tracing::warn!(thread = %self.approval.thread(), "record the {what}: {e}");
        }
    }
}

#[async_trait::async_trait]
impl worktree::Progress for ThreadProgress<'_> {
    async fn post(&self, text: &str) -> Option<String> {
        let effects = Effects::new(&self.approval.thread()).push(Effect::Post {
            text: format!("{PREFIX}{}", escape_text(text)),
            blocks: None,
        });
        self.send(effects.clone(), "preparation progress").await;
        self.outbox.posted(&effects.id(0)).await
    }

    async fn update(&self, handle: &str, text: &str) {
        let a = self.approval;
        let text = format!("{PREFIX}{}", escape_text(text));
        if let Err(e) = self.outbox.sender().update(&a.channel, handle, &text).await {
            tracing::warn!(thread = %a.thread(), "update preparation progress: {e}");
        }
    }

    async fn markdown(&self, markdown: &str) {
        let effects = Effects::new(&self.approval.thread()).reply(markdown, PREFIX);
        self.send(effects, "preparation output").await;
    }

    async fn failed(&self) {
        let a = self.approval;
        self.send(
            Effects::new(&a.thread()).react(&a.ts, "x"),
            "failure reaction",
        )
        .await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use codebutler_proto::runner::v1::{ToolStarted, TurnBegun, Usage};

    #[test]
    fn pull_request_links_come_from_successful_open_pr_calls() {
        let finished = |tool: &str, summary: &str, is_error: bool| {
            Event::ToolFinished(codebutler_proto::runner::v1::ToolFinished {
                call_id: "c".into(),
                tool: tool.into(),
                summary: summary.into(),
                is_error,
                duration_ms: 1,
            })
        };
        assert_eq!(
            pull_request_url(&finished(
                "OpenPR",
                "opened pull request #7: https://github.com/a/b/pull/7",
                false
            )),
            Some("https://github.com/a/b/pull/7".into())
        );
        assert_eq!(
            pull_request_url(&finished("OpenPR", "error: push refused", true)),
            None
        );
        assert_eq!(
            pull_request_url(&finished("Bash", "see https://x.y", false)),
            None
        );
    }

    #[test]
    fn status_shows_turn_activity_time_tokens_and_cost() {
        let mut s = Status {
            summary: "Fix expiry".into(),
            branch: "codebutler/fix-expiry".into(),
            ..Status::default()
        };
        assert_eq!(
            s.render(Duration::ZERO),
            "*Coder:* working on _Fix expiry_ in `codebutler/fix-expiry`\nstarting the sandbox…"
        );
        s.apply(&Event::TurnBegun(TurnBegun {
            turn: 3,
            max_turns: 25,
        }));
        s.apply(&Event::ToolStarted(ToolStarted {
            call_id: "c".into(),
            tool: "Edit".into(),
            summary: "editing src/auth.rs".into(),
        }));
        s.apply(&Event::Usage(Usage {
            prompt_tokens: 1000,
            completion_tokens: 200,
            cached_tokens: 0,
            cost_usd: 0.125,
        }));
        assert_eq!(
            s.render(Duration::from_secs(72)),
            "*Coder:* working on _Fix expiry_ in `codebutler/fix-expiry`\nturn 3 of 25 · editing src/auth.rs · 1m 12s · 1200 tokens · $0.12"
        );
    }

    fn ended(state: RunState, ending: &str) -> RunRecord {
        RunRecord {
            id: "42".into(),
            thread: crate::domain::ThreadKey {
                channel: "C1".into(),
                thread_ts: "1.1".into(),
            },
            state,
            plan: "📋 **Plan:** Fix expiry\n\n1. Edit it\n".into(),
            model: "m".into(),
            worktree: "/w".into(),
            branch: "codebutler/fix-expiry".into(),
            max_turns: 25,
            turns: 4,
            prompt_tokens: 1000,
            completion_tokens: 234,
            cost: 0.5,
            ending: Some(ending.into()),
            exit_code: Some(0),
            runner_pid: Some(7),
            created_at: "2026-11-24T10:00:00.000000Z".into(),
            started_at: Some("2026-11-24T10:00:01.000000Z".into()),
            ended_at: Some("2026-11-24T10:01:13.500000Z".into()),
        }
    }

    #[test]
    fn a_finished_run_ends_with_its_final_line_its_last_words_and_a_check_mark() {
        let run = ended(RunState::Finished, "completed: fixed it");
        let effects = end_effects(
            &run,
            "Fixed the expiry.",
            &[],
            Some("status:42/1"),
            Some("1.2"),
        );
        assert_eq!(effects.group(), "end:42");
        let final_line = "*Coder:* finished _Fix expiry_ in `codebutler/fix-expiry` · 4 turns · 1m 12s · 1234 tokens · $0.50";
        assert_eq!(
            effects.effects(),
            Effects::named("end:42", &run.thread)
                .update(
                    MessageRef::Post("status:42/1".into()),
                    final_line,
                    crate::slack::interactive::sections(final_line)
                )
                .push(Effect::Post {
                    text: "*Coder:* Fixed the expiry.".into(),
                    blocks: None
                })
                .react("1.2", "white_check_mark")
                .effects()
        );
    }

    #[test]
    fn a_run_cut_off_says_so_and_how_to_go_on() {
        let run = ended(RunState::Interrupted, "the controller stopped while it ran");
        let effects = end_effects(&run, "half way", &[], None, None);
        assert_eq!(
            effects.effects(),
            [Effect::Post {
                text: "*Coder:* I was stopped while working on this (the CodeButler service restarted). Say *continue* to pick up where I left off, or *undo* to drop what I changed.".into(),
                blocks: None
            }],
            "without a status message or its approval known, only the summary"
        );
        let failed = ended(RunState::Failed, "model failed: refused");
        let effects = end_effects(
            &failed,
            "",
            &["https://x/pull/7".into()],
            Some("s/1"),
            Some("1.2"),
        );
        let [
            Effect::Update { text, .. },
            Effect::Post { text: link, .. },
            Effect::Post { text: summary, .. },
            Effect::React { name, .. },
        ] = effects.effects()
        else {
            panic!("update, link, summary, reaction");
        };
        assert_eq!(
            link, "*Coder:* opened a pull request: https://x/pull/7",
            "a pull request nobody announced is, with the end"
        );
        assert!(text.starts_with("*Coder:* stopped _Fix expiry_"), "{text}");
        assert_eq!(
            summary,
            "*Coder:* model failed: refused.\n\nSay *continue* to pick up where I stopped, or *undo* to drop what I changed."
        );
        assert_eq!(name, "x");
    }

    #[test]
    fn status_shows_model_text_as_text() {
        let mut s = Status {
            summary: "Ping <!channel> & <https://evil.example|https://good.example>".into(),
            branch: "codebutler/ping".into(),
            ..Status::default()
        };
        s.apply(&Event::TurnBegun(TurnBegun {
            turn: 1,
            max_turns: 25,
        }));
        s.apply(&Event::ToolStarted(ToolStarted {
            call_id: "c".into(),
            tool: "Bash".into(),
            summary: "running `echo <!here>`".into(),
        }));
        assert_eq!(
            s.render(Duration::ZERO),
            "*Coder:* working on _Ping &lt;!channel&gt; &amp; &lt;https://evil.example|https://good.example&gt;_ in `codebutler/ping`\nturn 1 of 25 · running `echo &lt;!here&gt;` · 0s · 0 tokens · $0.00"
        );
    }
}
