//! Following a run: its status message edited in place (at most every
//! [`STATUS_INTERVAL`]), its task cards streamed beside it ([`super::task_cards`]), pull request links and notices said in the thread, questions
//! handed to the PM's desk ([`crate::pm::questions`]), and the end reported when it ends.

use std::time::Duration;

use codebutler_proto::runner::v1::runner_event::Event;
use prost::Message;
use tokio::sync::broadcast;
use tokio::sync::broadcast::error::RecvError;
use tokio::time::Instant;

use super::status::{STATUS_INTERVAL, Status, plan_summary};
use super::task_cards::TaskCards;
use super::{
    PREFIX, SlackCoder, pull_request_group, pull_request_line, pull_request_url, status_group,
};
use crate::domain::{IncomingMessage, RunRecord};
use crate::runners::supervisor::RunEvent;
use crate::slack::effects::{Effect, Effects};
use crate::workspace::worktree;

impl SlackCoder {
    /// Posts the run's status message (and 👀 on `approval`) and follows the run in the
    /// background.
    pub(super) async fn follow(
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
        self.say_unseen_images(&approval.thread(), &run.id).await;
        let cards = TaskCards::start(
            self.outbox.sender(),
            &self.store,
            approval,
            &run.id,
            &status.summary,
        )
        .await;
        let follower = Follower {
            coder: self.clone(),
            run_id: run.id,
            approval: approval.clone(),
            status_id: effects.id(1),
            status_ts: None,
            status,
            cards,
        };
        self.followers.spawn(follower.run(events));
    }
}

/// Follows one run of a thread until it ends.
struct Follower {
    coder: SlackCoder,
    run_id: String,
    approval: IncomingMessage,
    /// The outbox id of the status message; its ts once known.
    status_id: String,
    status_ts: Option<String>,
    status: Status,
    /// The run's task cards, where Slack streams them.
    cards: TaskCards,
}

impl Follower {
    /// Follows the run's `events` to its end, then reports the end.
    async fn run(mut self, mut events: broadcast::Receiver<RunEvent>) {
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
                    self.cards.flush().await;
                    // While it waits for a Coder slot, its place is shown as it moves up.
                    let place = self.coder.supervisor.queue_place(&self.run_id);
                    if self.status.turn == 0 && place != self.status.queue_place {
                        let shown = std::mem::replace(&mut self.status.queue_place, place);
                        if self.edit(started.elapsed()).await {
                            last_edit = Instant::now();
                            dirty = false;
                        } else {
                            // Not shown yet (the message not posted, Slack failing): next tick.
                            self.status.queue_place = shown;
                        }
                    }
                    if dirty && last_edit.elapsed() >= STATUS_INTERVAL {
                        self.edit(started.elapsed()).await;
                        last_edit = Instant::now();
                        dirty = false;
                    }
                }
            }
        }
        self.cards.finish().await;
        // A run still going here lost its supervisor: it is reported at the next start.
        self.coder.report_end(&self.run_id).await;
    }

    /// What one event of the run means for the thread: the status, a PR link, a notice, a
    /// question for the PM or the people.
    async fn on_event(&mut self, seq: i64, event: &Event) {
        self.status.apply(event);
        self.cards.apply(event);
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
                self.coder.questions(),
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

    /// Edits the live status message in place; whether Slack took the edit. Not through the
    /// outbox: the next edit or the run's end supersedes a lost one.
    async fn edit(&mut self, elapsed: Duration) -> bool {
        if self.status_ts.is_none() {
            self.status_ts = self.coder.outbox.posted(&self.status_id).await;
        }
        let Some(ts) = &self.status_ts else {
            return false;
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
            return false;
        }
        true
    }
}
