//! The Coder in a Slack thread: an approved plan becomes a run in a fresh worktree, and the
//! run's progress lives in one status message edited in place (at most every 10 s: turn,
//! what the Coder is doing now, elapsed time, tokens, cost). 👀 on the approval while it
//! runs, then ✅ or ❌, and a short summary of how it ended.

use std::path::PathBuf;
use std::time::Duration;

use codebutler_proto::runner::v1::runner_event::Event;
use prost::Message;
use tokio::sync::broadcast::error::RecvError;
use tokio::sync::{broadcast, watch};
use tokio::time::Instant;

use crate::layout::Layout;
use crate::pm::Pm;
use crate::pm::tools::Plan;
use crate::runners::supervisor::{Resume, RunEvent, RunRequest, Supervisor};
use crate::runners::{checkpoint, forge, worktree};
use crate::slack::api::Sender;
use crate::slack::format::escape_text;
use crate::store::{IncomingMessage, RunRecord, RunState, Store};

/// Least time between two edits of a status message.
pub const STATUS_INTERVAL: Duration = Duration::from_secs(10);
const PREFIX: &str = "*Coder:* ";

/// Starts and reports Coder runs for Slack threads.
#[derive(Clone, Debug)]
pub struct SlackCoder {
    pub supervisor: Supervisor,
    pub layout: Layout,
    pub sender: Sender,
    pub store: Store,
    /// Fetches, creates and prepares the worktree of an approved plan.
    pub prepare: worktree::Preparer,
    /// Answers the Coder's questions first (see [`crate::questions`]).
    pub pm: Pm,
}

impl SlackCoder {
    /// Starts the run of an approved plan (stored JSON) in a fresh worktree, posts its
    /// status message and follows it in the background.
    pub async fn start(&self, approval: &IncomingMessage, plan_json: &str) -> Result<(), String> {
        let plan: Plan =
            serde_json::from_str(plan_json).map_err(|e| format!("read the plan: {e}"))?;
        let plan_text = plan.to_markdown();
        let progress = ThreadProgress {
            sender: &self.sender,
            approval,
        };
        let tree = self
            .prepare
            .create(&plan.summary, &progress)
            .await
            .map_err(|e| e.to_string())?;
        // The runner starts (process, sandbox, hub) while the worktree is prepared; it gets
        // its task, and the Coder its first step, only once the preparation succeeded.
        let (ready, ready_rx) = watch::channel(false);
        let (run, events) = self
            .begin(approval, plan_text, &tree, None, Some(ready_rx))
            .await?;
        if let Err(e) = self.prepare.init_or_remove(&tree, &progress).await {
            let reason = "the worktree could not be prepared";
            self.supervisor.cancel(&approval.thread_ts, reason).await;
            return Err(e.to_string());
        }
        let _ = ready.send(true);
        self.follow(approval, &plan.summary, &tree, run, events)
            .await
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
        let summary = last.plan.lines().next().unwrap_or_default().to_owned();
        let tree = worktree::Worktree { path, branch };
        let resume = Resume {
            conversation,
            message: format!("<@{}>: {}", msg.user, msg.text),
        };
        let (run, events) = self
            .begin(msg, last.plan.clone(), &tree, Some(resume), None)
            .await?;
        self.follow(msg, &summary, &tree, run, events).await
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

    /// "undo": puts the worktree back to the checkpoint taken before the thread's last run
    /// and makes that run's conversation the one the next run resumes. Returns the reply.
    pub async fn undo(&self, msg: &IncomingMessage) -> String {
        let thread = msg.thread();
        if self.supervisor.is_active(&thread.thread_ts) {
            return "I'm still working: say **stop** first, then **undo**.".into();
        }
        let checkpoint = match self.store.latest_checkpoint(&thread).await {
            Ok(Some(c)) => c,
            Ok(None) => return "There is nothing to undo in this thread.".into(),
            Err(e) => return format!("I couldn't read this thread's checkpoints ({e})."),
        };
        let snapshot = checkpoint::Snapshot {
            tree: checkpoint.tree_sha.clone(),
            head: checkpoint.head_sha.clone(),
        };
        let path = PathBuf::from(&checkpoint.worktree);
        let restored =
            tokio::task::spawn_blocking(move || checkpoint::restore(&path, &snapshot)).await;
        let restored = match restored {
            Ok(Ok(restored)) => restored,
            Ok(Err(e)) => return format!("I couldn't undo: {e}. Nothing was changed."),
            Err(e) => return format!("I couldn't undo: {e}."),
        };
        tracing::info!(
            tag = "CLD",
            "thread {thread} → undid run {}",
            checkpoint.run_id
        );
        let stored = async {
            self.store.drop_checkpoint(&checkpoint.run_id).await?;
            if let Some(latest) = self.store.latest_run(&thread.thread_ts).await? {
                self.store
                    .set_run_conversation(&latest.id, &checkpoint.conversation)
                    .await?;
            }
            Ok::<_, crate::store::StoreError>(())
        };
        if let Err(e) = stored.await {
            tracing::error!(thread = %thread, "record undo: {e}");
        }
        let short = checkpoint.head_sha.get(..7).unwrap_or_default();
        let mut reply =
            String::from("Undone: the worktree is back to where it was before my last run.");
        if restored.head_reset {
            reply.push_str(&format!(" The branch is back at `{short}`."));
        } else {
            reply.push_str(
                " Its commits were already pushed, so they stay: the reverted files are uncommitted changes, and my next commit records them.",
            );
        }
        reply.push_str(" Tell me what to do instead.");
        reply
    }

    /// Tells the threads of runs the last controller left running that they stopped, and
    /// how to go on.
    pub async fn report_interrupted(&self, runs: Vec<RunRecord>) {
        for run in runs {
            let text = format!(
                "{PREFIX}I was stopped while working on this (the CodeButler service restarted). Say *continue* to pick up where I left off, or *undo* to drop what I changed."
            );
            if let Err(e) = self
                .sender
                .post(&run.thread.channel, &run.thread.thread_ts, &text)
                .await
            {
                tracing::warn!(thread = %run.thread, "report interrupted run {}: {e}", run.id);
            }
        }
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
            _ => serde_json::to_string(&[codebutler_runner::agent::plan_message(&last.plan)])
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

    /// Posts the run's status message and follows it in the background; `approval` gets
    /// the reactions.
    async fn follow(
        &self,
        approval: &IncomingMessage,
        summary: &str,
        tree: &worktree::Worktree,
        run: RunRecord,
        events: broadcast::Receiver<RunEvent>,
    ) -> Result<(), String> {
        let _ = self
            .sender
            .react(&approval.channel, &approval.ts, "eyes")
            .await;
        let status = Status {
            summary: summary.to_owned(),
            branch: tree.branch.clone(),
            max_turns: u32::try_from(run.max_turns).unwrap_or(0),
            ..Status::default()
        };
        let first = status.render(Duration::ZERO);
        let status_ts = self
            .sender
            .post_blocks(
                &approval.channel,
                &approval.thread_ts,
                &first,
                crate::slack::interactive::status_blocks(&first),
            )
            .await
            .map_err(|e| e.to_string())?;
        let follower = Follower {
            coder: self.clone(),
            run_id: run.id,
            approval: approval.clone(),
            status_ts,
            status,
        };
        tokio::spawn(follower.run(events));
        Ok(())
    }
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
    last_text: String,
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
            Event::AssistantText(a) => self.last_text = a.text.clone(),
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
    status_ts: String,
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
        let state = loop {
            tokio::select! {
                event = events.recv() => match event {
                    Ok(e) if e.run_id != self.run_id => {}
                    Ok(e) => {
                        if let Some(state) = e.ended {
                            break state;
                        }
                        if e.seq < next_seq {
                            continue; // already read from the store after a lag
                        }
                        next_seq = e.seq + 1;
                        if let Some(event) = &e.event.event {
                            self.on_event(event).await;
                            dirty = true;
                        }
                    }
                    Err(RecvError::Lagged(missed)) => {
                        tracing::warn!(run = %self.run_id, "status follower missed {missed} events; reading them from the store");
                        dirty = true;
                        if let Some(state) = self.catch_up(&mut next_seq).await {
                            break state;
                        }
                    }
                    Err(RecvError::Closed) => break RunState::Interrupted,
                },
                _ = tick.tick() => {
                    if dirty && last_edit.elapsed() >= STATUS_INTERVAL {
                        self.edit(started.elapsed()).await;
                        last_edit = Instant::now();
                        dirty = false;
                    }
                }
            }
        };
        self.finish(state, started.elapsed()).await;
    }

    /// What one event of the run means for the thread: the status, a PR link, a notice, a
    /// question for the PM or the people.
    async fn on_event(&mut self, event: &Event) {
        self.status.apply(event);
        if let Some(url) = pull_request_url(event) {
            self.announce_pull_request(&url).await;
        }
        if let Event::Notice(notice) = event {
            self.post_notice(&notice.text).await;
        }
        if let Event::Question(question) = event {
            tokio::spawn(crate::questions::handle_question(
                self.coder.clone(),
                self.run_id.clone(),
                self.approval.clone(),
                question.clone(),
            ));
        }
    }

    /// After the broadcast dropped events (a slow Slack, a busy machine): reads them from
    /// the store, where the supervisor records every event before broadcasting it, so no
    /// question or PR link is lost. Returns the run's final state if it ended meanwhile.
    async fn catch_up(&mut self, next_seq: &mut i64) -> Option<RunState> {
        let store = self.coder.store.clone();
        match store.run_events(&self.run_id, *next_seq).await {
            Ok(missed) => {
                for (seq, body) in missed {
                    *next_seq = seq + 1;
                    match codebutler_proto::runner::v1::RunnerEvent::decode(body.as_slice()) {
                        Ok(recorded) => {
                            if let Some(event) = &recorded.event {
                                self.on_event(event).await;
                            }
                        }
                        Err(e) => tracing::warn!(run = %self.run_id, "stored event {seq}: {e}"),
                    }
                }
            }
            Err(e) => tracing::error!(run = %self.run_id, "read missed events: {e}"),
        }
        match store.run(&self.run_id).await {
            Ok(Some(run)) if run.state.is_final() => Some(run.state),
            _ => None,
        }
    }

    async fn post_notice(&self, text: &str) {
        let parts = crate::slack::format::render_reply(text, PREFIX);
        if let Err(e) = self
            .coder
            .sender
            .send(&self.approval.channel, &self.approval.thread_ts, &parts)
            .await
        {
            tracing::warn!(thread = %self.approval.thread(), "post notice: {e}");
        }
    }

    async fn announce_pull_request(&self, url: &str) {
        let text = format!("{PREFIX}opened a pull request: {}", escape_text(url));
        if let Err(e) = self
            .coder
            .sender
            .post(&self.approval.channel, &self.approval.thread_ts, &text)
            .await
        {
            tracing::warn!(thread = %self.approval.thread(), "post pull request link: {e}");
        }
    }

    async fn edit(&self, elapsed: Duration) {
        let text = self.status.render(elapsed);
        if let Err(e) = self
            .coder
            .sender
            .update_blocks(
                &self.approval.channel,
                &self.status_ts,
                &text,
                crate::slack::interactive::status_blocks(&text),
            )
            .await
        {
            tracing::warn!(thread = %self.approval.thread(), "update status: {e}");
        }
    }

    async fn finish(&self, state: RunState, elapsed: Duration) {
        let run = self.coder.store.run(&self.run_id).await.ok().flatten();
        let ending = run
            .as_ref()
            .and_then(|r| r.ending.clone())
            .unwrap_or_else(|| state.as_str().to_owned());
        let ok = state == RunState::Finished && ending.starts_with("completed");
        let turns = run
            .as_ref()
            .map_or(i64::from(self.status.turn), |r| r.turns);
        let final_status = format!(
            "{PREFIX}{} _{}_ in `{}` · {} turns · {} · {} tokens · ${:.2}",
            if ok { "finished" } else { "stopped" },
            escape_text(&self.status.summary),
            escape_text(&self.status.branch),
            turns,
            elapsed_text(elapsed),
            self.status.tokens,
            self.status.cost
        );
        let channel = &self.approval.channel;
        if let Err(e) = self
            .coder
            .sender
            .update_blocks(
                channel,
                &self.status_ts,
                &final_status,
                crate::slack::interactive::sections(&final_status),
            )
            .await
        {
            tracing::warn!("update status: {e}");
        }
        let mut summary =
            crate::budget::plain_ending(&ending).unwrap_or_else(|| format!("{ending}."));
        if ok && !self.status.last_text.is_empty() {
            summary = self.status.last_text.clone();
        } else if !ok {
            summary.push_str(
                "\n\nSay **continue** to pick up where I stopped, or **undo** to drop what I changed.",
            );
        }
        let parts = crate::slack::format::render_reply(&summary, PREFIX);
        if let Err(e) = self
            .coder
            .sender
            .send(channel, &self.approval.thread_ts, &parts)
            .await
        {
            tracing::warn!("post run summary: {e}");
        }
        // The thread stays in the coder phase: its plan was used. A new plan from the PM
        // puts it back in line for approval.
        let reaction = if ok { "white_check_mark" } else { "x" };
        let _ = self
            .coder
            .sender
            .react(channel, &self.approval.ts, reaction)
            .await;
    }
}

/// Worktree preparation's progress as `*Coder:*` lines in the approval's thread, and ❌ on
/// the approval when it fails.
struct ThreadProgress<'a> {
    sender: &'a Sender,
    approval: &'a IncomingMessage,
}

#[async_trait::async_trait]
impl worktree::Progress for ThreadProgress<'_> {
    async fn post(&self, text: &str) -> Option<String> {
        let a = self.approval;
        match self
            .sender
            .post(
                &a.channel,
                &a.thread_ts,
                &format!("{PREFIX}{}", escape_text(text)),
            )
            .await
        {
            Ok(ts) => Some(ts),
            Err(e) => {
                tracing::warn!(thread = %a.thread(), "post preparation progress: {e}");
                None
            }
        }
    }

    async fn update(&self, handle: &str, text: &str) {
        let a = self.approval;
        let text = format!("{PREFIX}{}", escape_text(text));
        if let Err(e) = self.sender.update(&a.channel, handle, &text).await {
            tracing::warn!(thread = %a.thread(), "update preparation progress: {e}");
        }
    }

    async fn markdown(&self, markdown: &str) {
        let a = self.approval;
        let parts = crate::slack::format::render_reply(markdown, PREFIX);
        if let Err(e) = self.sender.send(&a.channel, &a.thread_ts, &parts).await {
            tracing::warn!(thread = %a.thread(), "post preparation output: {e}");
        }
    }

    async fn failed(&self) {
        let a = self.approval;
        let _ = self.sender.react(&a.channel, &a.ts, "x").await;
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
