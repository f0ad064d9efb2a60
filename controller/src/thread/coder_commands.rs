//! The commands that start, steer, stop or undo the thread's Coder: an approval, a follow-up
//! on an ended run, a message or "stop" for a running Coder, the Stop button, "undo".

use crate::domain::{
    Click, FileKind, FileState, IncomingMessage, Plan, Role, RunRecord, StoredFile,
};
use crate::gateway::budget::cap_text;
use crate::gateway::caps;
use crate::pm::attachments::shown_name;
use crate::slack::effects::Effects;
use crate::slack::interactive::reaction_target;
use crate::store::{Change, RunStart};
use crate::thread::handler::{Settle, ThreadHandler};
use crate::thread::plan_commands::resolve;

impl ThreadHandler {
    /// An approval of the thread's pending plan: starts the Coder (at most once). The
    /// message stays pending until the run is started and announced; a crash meanwhile is
    /// sorted out at the next start ([`crate::reconcile`]).
    pub(super) async fn approve(&self, msg: &IncomingMessage) -> Settle {
        let thread = msg.thread();
        let plan = match self.store.approve_plan(&thread, msg).await {
            Ok(Some(plan)) => plan,
            // Approved a moment ago by someone else: nothing more to start.
            Ok(None) => return Settle::Processed,
            Err(e) => {
                tracing::error!(thread = %thread, "approve plan: {e}");
                return Settle::Failed;
            }
        };
        tracing::info!(
            tag = "INF",
            "thread {thread} → approved by {}, starting coder",
            msg.user
        );
        self.approve_budget(msg).await;
        let started = match Plan::from_json(&plan) {
            // A merge's conflicts to resolve: the run goes on in the thread's worktree.
            Ok(plan) => match self.resolving(&thread).await {
                Some(last) => {
                    self.start_resolution(&reaction_target(msg), &plan, &last)
                        .await
                }
                None => self.coder.start(&reaction_target(msg), &plan).await,
            },
            Err(e) => Err(crate::coder::StartFailure {
                reason: format!("read the plan: {e}"),
                run: None,
            }),
        };
        let Err(failure) = started else {
            return Settle::Processed;
        };
        tracing::error!(thread = %thread, "start coder: {}", failure.reason);
        let reply = format!(
            "I couldn't start the Coder ({}). The plan is still waiting; approve it again to retry.",
            failure.reason
        );
        let mut changes = vec![Change::PlanPending(&thread), Change::Processed(msg)];
        if let Some(run) = &failure.run {
            // The run never began: this reply is its end.
            changes.push(Change::RunReported(run));
        }
        self.reply(msg, Role::Pm, &reply, &changes).await
    }

    /// When a cap that holds across threads (`access.maxCostPerDay`, `.maxCostPerUserPerDay`,
    /// the hourly Coder calls) refuses the run `msg` would start (its author's: the person
    /// who starts a run answers for its spend): the thread is told which cap, its figure and
    /// when it resets, and nothing starts. `None`: the run may start.
    pub(super) async fn over_cap(&self, msg: &IncomingMessage) -> Option<Settle> {
        let now = chrono::Utc::now();
        let refused = caps::refusal(&self.store, self.caps, &msg.user, now).await?;
        tracing::info!(
            tag = "INF",
            "thread {} → run not started for {}: {refused:?}",
            msg.thread(),
            msg.user
        );
        Some(self.answer(msg, Role::Pm, &refused.markdown(now)).await)
    }

    /// At approval, fixes the cap the Coder runs under (a typed one, else the default).
    async fn approve_budget(&self, msg: &IncomingMessage) {
        let thread = msg.thread();
        match self
            .store
            .approve_thread_budget(&thread, self.max_cost_per_thread, &msg.user)
            .await
        {
            Ok(cap) => tracing::info!(tag = "INF", "thread {thread} → budget {}", cap_text(cap)),
            // The hub then finds no cap: say so loudly rather than block the approval.
            Err(e) => tracing::error!(thread = %thread, "record the approved budget: {e}"),
        }
    }

    /// A message after the thread's run ended: a new run goes on from it.
    pub(super) async fn follow_up(&self, msg: &IncomingMessage, last: &RunRecord) -> Settle {
        tracing::info!(
            tag = "CLD",
            "thread {} → {} follows up on run {}",
            msg.thread(),
            msg.user,
            last.id
        );
        if let Err(e) = self.store.mark_run_start(msg, RunStart::FollowUp).await {
            tracing::error!(thread = %msg.thread(), "record the start of a run: {e}");
            return Settle::Failed;
        }
        match self.coder.resume(msg, last).await {
            Ok(()) => Settle::Processed,
            Err(e) => {
                tracing::error!(thread = %msg.thread(), "resume coder: {e}");
                let reply = format!("I couldn't go on from my last run ({e}).");
                self.answer(msg, Role::Coder, &reply).await
            }
        }
    }

    /// "stop" while the Coder runs.
    pub(super) async fn stop_coder(&self, msg: &IncomingMessage) -> Settle {
        if self.cancel_run(msg).await {
            self.react(msg, "octagonal_sign").await;
            Settle::Processed
        } else {
            Settle::NotTaken
        }
    }

    /// A message while the Coder runs: while it waits for people to answer its question, the
    /// message is the answer; anything else reaches it before its next turn. Its text is
    /// what was typed and heard ([`super::senses`]), followed by the names of the files
    /// shared on it, stored in the thread's attachments directory (an image also reaches
    /// the Coder's model on its next request, when the model takes images); the thread is
    /// told once which files were not read, and when the Coder's model cannot see an image.
    pub(super) async fn to_running_coder(&self, msg: &IncomingMessage) -> Settle {
        let thread = &msg.thread_ts;
        let files = match self.store.message_files(msg).await {
            Ok(files) => files,
            Err(e) => {
                tracing::error!(thread = %msg.thread(), "read the files of message {}: {e}", msg.ts);
                return Settle::Failed;
            }
        };
        let passed = IncomingMessage {
            text: for_the_coder(&msg.text, &files),
            ..msg.clone()
        };
        let supervisor = &self.coder.supervisor;
        let taken = match crate::pm::questions::answer_from_thread(supervisor, &self.store, &passed)
            .await
        {
            Some(answered) => answered,
            None => {
                let passed = supervisor.message(thread, &passed.text, &msg.user).await;
                if passed {
                    tracing::info!(tag = "CLD", "thread {thread} → message passed to the coder");
                }
                passed
            }
        };
        if !taken {
            return Settle::NotTaken;
        }
        self.react(msg, "incoming_envelope").await;
        self.say_files_to_coder(msg, &files).await;
        Settle::Processed
    }

    /// After a message with files reached the running Coder: the thread's line about the
    /// files that were not read (once, the step `files:<ts>`), and, when one of them is an
    /// image the Coder's model cannot see, the run's line saying so. Failures are logged:
    /// the Coder has the message.
    async fn say_files_to_coder(&self, msg: &IncomingMessage, files: &[StoredFile]) {
        if files.is_empty() {
            return;
        }
        let thread = msg.thread();
        let step = format!("files:{}", msg.ts);
        match self.store.step_done(&thread, &step).await {
            Ok(false) => {
                // Images are the run's line's: only the files refused are said here.
                let model = &self.coder.supervisor.limits().model;
                match self
                    .pm
                    .attachments
                    .line(&self.store, msg, model, true, &[])
                    .await
                {
                    Ok(Some(line)) => {
                        let changes = [Change::StepDone {
                            thread: &thread,
                            step: &step,
                        }];
                        let effects = Effects::new(&thread).reply(&line, "");
                        if let Err(e) = self.outbox.commit(&changes, &effects).await {
                            tracing::error!(thread = %thread, "record the files read for message {}: {e}", msg.ts);
                        }
                    }
                    Ok(None) => {}
                    Err(e) => {
                        tracing::error!(thread = %thread, "read the files of message {}: {e}", msg.ts)
                    }
                }
            }
            Ok(true) => {}
            Err(e) => {
                tracing::error!(thread = %thread, "read whether message {} had its files read: {e}", msg.ts)
            }
        }
        let image = files.iter().any(|f| {
            matches!(f.state, FileState::Stored(_))
                && FileKind::of(&f.file.mimetype) == Some(FileKind::Image)
        });
        if !image {
            return;
        }
        match self.store.latest_run(&msg.thread_ts).await {
            Ok(Some(run)) => self.coder.say_unseen_images(&thread, &run.id).await,
            Ok(None) => {}
            Err(e) => tracing::warn!(thread = %thread, "read the thread's run: {e}"),
        }
    }

    /// The Stop button on a running Coder's status: stops it, and the buttons give way to a
    /// line saying who stopped it.
    pub(super) async fn stop_button(&self, msg: &IncomingMessage, click: &Click) -> Settle {
        if !self.cancel_run(msg).await {
            return Settle::Processed;
        }
        let note = format!("⏹️ Cancelled by <@{}>", msg.user);
        match self
            .record(msg, &[Change::Processed(msg)], &resolve(msg, click, &note))
            .await
        {
            Settle::Failed => Settle::Processed,
            settled => settled,
        }
    }

    /// Stops the thread's run on `msg`'s word; whether there was one to stop.
    async fn cancel_run(&self, msg: &IncomingMessage) -> bool {
        let reason = format!("stopped in Slack by <@{}>", msg.user);
        self.coder.supervisor.cancel(&msg.thread_ts, &reason).await
    }

    /// "undo" in a thread that has had a run.
    pub(super) async fn undo(&self, msg: &IncomingMessage) -> Settle {
        let undo = self.coder.undo(msg).await;
        let mut changes = Vec::new();
        if let Some(undone) = &undo.undone {
            changes.push(Change::Undone {
                checkpoint_run: &undone.checkpoint_run,
                latest_run: undone.latest_run.as_deref(),
                conversation: &undone.conversation,
            });
        }
        changes.push(Change::Processed(msg));
        self.reply(msg, Role::Coder, &undo.reply, &changes).await
    }
}

/// Where the running Coder finds the files people share while it runs, relative to its
/// worktree.
pub const CODER_SHARED_DIR: &str = ".codebutler-attachments/";

/// The text a message passes to the running Coder: what was typed and heard, then the files
/// shared on it that were stored, each by its shared name and the name it is stored under
/// in [`CODER_SHARED_DIR`]. Files refused, and voice notes (their transcript is the text),
/// are not named.
fn for_the_coder(text: &str, files: &[StoredFile]) -> String {
    let stored: Vec<String> = files
        .iter()
        .filter_map(|f| match &f.state {
            FileState::Stored(name) => Some(format!("`{}` as `{name}`", shown_name(&f.file.name))),
            _ => None,
        })
        .collect();
    if stored.is_empty() {
        return text.to_owned();
    }
    let shared = format!(
        "[shared files, read-only in {CODER_SHARED_DIR}: {}]",
        stored.join(", ")
    );
    match text.trim_end() {
        "" => shared,
        said => format!("{said}\n\n{shared}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::SharedFile;

    fn file(name: &str, mimetype: &str, state: FileState) -> StoredFile {
        StoredFile {
            position: 0,
            file: SharedFile {
                id: "F1".into(),
                name: name.into(),
                mimetype: mimetype.into(),
                url: "https://files.slack.com/F1".into(),
            },
            state,
        }
    }

    #[test]
    fn the_coder_is_told_the_stored_files_by_name_and_stored_name() {
        let files = [
            file(
                "crash`\n.log",
                "text/plain",
                FileState::Stored("1_2-0.txt".into()),
            ),
            file("memo.webm", "audio/webm", FileState::Transcribed),
            file(
                "big.zip",
                "application/zip",
                FileState::Refused("too big".into()),
            ),
            file(
                "shot.png",
                "image/png",
                FileState::Stored("1_2-3.png".into()),
            ),
        ];
        assert_eq!(
            for_the_coder("look at this\n", &files),
            "look at this\n\n[shared files, read-only in .codebutler-attachments/: `crash'.log` as `1_2-0.txt`, `shot.png` as `1_2-3.png`]"
        );
        assert_eq!(
            for_the_coder("", &files[..1]),
            "[shared files, read-only in .codebutler-attachments/: `crash'.log` as `1_2-0.txt`]"
        );
        assert_eq!(for_the_coder("use tabs", &files[1..3]), "use tabs");
    }
}
