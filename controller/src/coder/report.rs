//! How a run ended, said once in its thread: the status message's final line, pull requests
//! nobody announced, the summary (the Coder's last words, or why it stopped and how to go
//! on; whether it ran the project's tests and how they ended, [`tests_run`]) and ✅ or ❌
//! on the message that started it — committed with the run's `reported`
//! mark, by the follower or, after a crash, by the next start. With them go what the
//! branch now changes and the coordination notices that brings
//! ([`crate::coordination::Coordination::after_run`]).

use std::time::Duration;

use codebutler_agent::conversation::ChatMessage;
use codebutler_proto::runner::v1::runner_event::Event;
use prost::Message;

use super::pushed::{EndPush, end_push_line};
use super::status::plan_summary;
use super::tests_run;
use super::{
    PREFIX, SlackCoder, end_group, pull_request_group, pull_request_line, pull_request_url,
    status_group,
};
use crate::admin::server::CLI_CHANNEL;
use crate::domain::{RunRecord, RunState, ThreadKey, duration_text};
use crate::slack::effects::{Effect, Effects, MessageRef};
use crate::slack::format::escape_text;
use crate::store::Change;

/// What a run paused by the model provider's failure says in its thread, after why.
const PAUSED: &str = "Nothing of the work is lost: say **continue** to pick up where I stopped once the provider answers again, or **undo** to drop what I changed.";

/// What a run the controller's restart cut off says in its thread.
const INTERRUPTED: &str = "I was stopped while working on this (the CodeButler service restarted). Say **continue** to pick up where I left off, or **undo** to drop what I changed.";

impl SlackCoder {
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

    /// For a thread this instance takes from one that stopped (several instances on one
    /// store): its runs left queued or running are marked interrupted, and every run end of
    /// the thread not yet reported is reported.
    pub async fn report_runs_of_taken_thread(&self, thread: &ThreadKey) {
        match self.store.interrupt_unfinished_runs_of(thread).await {
            Ok(runs) if !runs.is_empty() => tracing::warn!(
                thread = %thread,
                "{} run(s) of the thread stopped with the instance running them",
                runs.len()
            ),
            Ok(_) => {}
            Err(e) => tracing::error!(thread = %thread, "interrupt the thread's runs: {e}"),
        }
        match self.store.unreported_runs(CLI_CHANNEL).await {
            Ok(runs) => {
                for run in runs.iter().filter(|r| r.thread == *thread) {
                    self.report_end(&run.id).await;
                }
            }
            Err(e) => {
                tracing::error!(thread = %thread, "read runs whose end was not reported: {e}")
            }
        }
    }

    /// Reports how the run ended in its thread, once: its status message's final line, the
    /// summary (the Coder's last words, or why it stopped, and what became of its commits:
    /// pushed to the open pull request, [`SlackCoder::push_at_end`]), ✅ or ❌ on what
    /// started it.
    pub async fn report_end(&self, run_id: &str) {
        let Some(run) = self.ended(run_id).await else {
            return;
        };
        let story = self.story(run_id).await;
        let unannounced = self.unannounced(run_id, story.pull_requests).await;
        let (status_post, approval_ts) = self.status_message(run_id).await;
        // The run's commits reach its thread's open pull request before the end is said.
        let pushed = self.push_at_end(&run).await;
        // What the run changed, against the other threads: recorded with the report, so a
        // crash neither loses nor repeats a notice.
        let coordination = self.coordination.after_run(&run).await;
        let notes: Vec<String> = [self.tests_line(&run).await, self.fallback_line(&run).await]
            .into_iter()
            .flatten()
            .collect();
        let notes = (!notes.is_empty()).then(|| notes.join("\n\n"));
        let effects = end_effects(
            &run,
            &story.last_text,
            notes.as_deref(),
            pushed.as_ref(),
            &unannounced,
            status_post.as_deref(),
            approval_ts.as_deref(),
        );
        let mut changes = vec![Change::RunReported(run_id)];
        if let Some(after) = &coordination {
            changes.extend(after.changes());
        }
        match self.outbox.commit(&changes, &effects).await {
            Ok(true) => {
                tracing::info!(tag = "CLD", "thread {} → run {run_id} reported", run.thread);
                self.coordination
                    .recorded(coordination.as_ref().map_or(&[], |a| &a.notices));
                // The steps once a pull request opened, if this run's thread has one.
                let after_pr = self.after_pr.clone();
                tokio::spawn(async move { after_pr.run(&run.thread).await });
            }
            Ok(false) => tracing::debug!(run = run_id, "run end reported already"),
            Err(e) => tracing::error!(run = run_id, "record the run's end: {e}"),
        }
    }

    /// The summary's line naming the fallback that answered some of the run's calls while
    /// its model failed (`coder.fallback`), said once with the run's end; `None` when its
    /// own model answered every call.
    async fn fallback_line(&self, run: &RunRecord) -> Option<String> {
        let models = match self
            .store
            .models_since(&run.thread, "coder", &run.created_at)
            .await
        {
            Ok(models) => models,
            Err(e) => {
                tracing::warn!(run = %run.id, "read which models answered the run: {e}");
                return None;
            }
        };
        let others: Vec<String> = models
            .into_iter()
            .filter(|m| *m != run.model)
            .map(|m| format!("`{m}`"))
            .collect();
        (!others.is_empty()).then(|| {
            format!(
                "_Some of this run's calls were answered by {}: `{}` was failing, so its fallback stood in._",
                others.join(", "),
                run.model
            )
        })
    }

    /// The summary's line about the project's tests, read from the run's stored
    /// conversation ([`tests_run`]); `None` when there is nothing to say.
    async fn tests_line(&self, run: &RunRecord) -> Option<String> {
        let conversation = match self.store.run_conversation(&run.id).await {
            Ok(Some(stored)) => match serde_json::from_str::<Vec<ChatMessage>>(&stored) {
                Ok(conversation) => conversation,
                Err(e) => {
                    tracing::warn!(run = %run.id, "read the run's conversation for its tests: {e}");
                    Vec::new()
                }
            },
            Ok(None) => Vec::new(),
            Err(e) => {
                tracing::warn!(run = %run.id, "read the run's conversation for its tests: {e}");
                Vec::new()
            }
        };
        let worktree = std::path::PathBuf::from(&run.worktree);
        let project = if worktree.is_dir() {
            self.test_command(&worktree).await
        } else {
            None
        };
        tests_run::line(
            &tests_run::read(&conversation, project.as_deref()),
            project.as_deref(),
        )
    }

    /// The run, when it has ended; `None` (logged) otherwise.
    async fn ended(&self, run_id: &str) -> Option<RunRecord> {
        match self.store.run(run_id).await {
            Ok(Some(run)) if run.state.is_final() => Some(run),
            Ok(Some(_)) => {
                tracing::warn!(run = run_id, "not reporting a run that has not ended");
                None
            }
            Ok(None) => {
                tracing::warn!(run = run_id, "no such run to report");
                None
            }
            Err(e) => {
                tracing::error!(run = run_id, "read the run to report its end: {e}");
                None
            }
        }
    }

    /// The links of the `opened` pull requests (seq of their event, link) the follower did
    /// not announce.
    async fn unannounced(&self, run_id: &str, opened: Vec<(i64, String)>) -> Vec<String> {
        let mut unannounced = Vec::new();
        for (seq, url) in opened {
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
        unannounced
    }

    /// The run's status message (its outbox id) and the message that started the run (its
    /// ts), when they were recorded.
    async fn status_message(&self, run_id: &str) -> (Option<String>, Option<String>) {
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
        (status_post, approval_ts)
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
}

/// What a run's events tell its end report.
#[derive(Debug, Default)]
struct Story {
    last_text: String,
    /// Pull requests opened, with the seq of their event.
    pull_requests: Vec<(i64, String)>,
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
        duration_text(run_elapsed(run)),
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
    if run.state == RunState::Paused {
        let why = run
            .ending
            .as_deref()
            .and_then(|e| e.strip_prefix("paused: "))
            .unwrap_or("no Coder model answered");
        return format!("Paused: {why}. {PAUSED}");
    }
    let ending = run
        .ending
        .clone()
        .unwrap_or_else(|| run.state.as_str().to_owned());
    if succeeded(run) && !last_text.is_empty() {
        return last_text.to_owned();
    }
    let mut summary =
        crate::gateway::budget::plain_ending(&ending).unwrap_or_else(|| format!("{ending}."));
    if !succeeded(run) {
        summary.push_str(
            "\n\nSay **continue** to pick up where I stopped, or **undo** to drop what I changed.",
        );
    }
    summary
}

/// The effects reporting a run's end: the status message's final line (when it was
/// posted), the links of pull requests nobody announced (the follower died first), the
/// summary with what became of the run's commits, and ✅ or ❌ on the message that started
/// the run (when known).
fn end_effects(
    run: &RunRecord,
    last_text: &str,
    notes: Option<&str>,
    pushed: Option<&EndPush>,
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
    let mut summary = end_summary(run, last_text);
    if let Some(notes) = notes {
        summary.push_str("\n\n");
        summary.push_str(notes);
    }
    if let Some(pushed) = pushed {
        summary.push_str("\n\n");
        summary.push_str(&end_push_line(pushed));
    }
    effects = effects.reply(&summary, PREFIX);
    if let Some(ts) = approval_ts {
        let reaction = if succeeded(run) {
            "white_check_mark"
        } else if run.state == RunState::Paused {
            "double_vertical_bar"
        } else {
            "x"
        };
        effects = effects.react(ts, reaction);
    }
    effects
}

#[cfg(test)]
mod tests {
    use super::*;

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
            None,
            None,
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
        let effects = end_effects(&run, "half way", None, None, &[], None, None);
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
            Some("Tests: `pytest` failed (exit 1)."),
            None,
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
            "*Coder:* model failed: refused.\n\nSay *continue* to pick up where I stopped, or *undo* to drop what I changed.\n\nTests: `pytest` failed (exit 1)."
        );
        assert_eq!(name, "x");
    }
}
