//! The thread's side of the review loop: the PR watcher's round is sorted by the PM (what
//! the round gives of the comments of people who may steer the Coder, bounded), or shown as
//! it is (failing checks), and proposed in one message that also names the comments of
//! people who may not, and says what was left out or cut; *yes*
//! hands it to the Coder as a follow-up run, *no* leaves it; the cap is said once. What the
//! thread says and the round's new state are recorded together ([`Change::Review`]), so a
//! round is proposed, approved or declined once, whatever crashes.

use tokio_util::sync::CancellationToken;

use crate::closing::{proposal, review_input, sorting};
use crate::domain::{IncomingMessage, Role, RunRecord, ThreadKey};
use crate::slack::effects::Effects;
use crate::store::reviews::{ReviewChange, RoundKind, RoundRecord, RoundState, StoredComment};
use crate::store::{Change, RunStart};
use crate::thread::handler::{Settle, ThreadHandler};

impl ThreadHandler {
    /// The thread's oldest round in `state` numbered `number` (any number when `None`).
    async fn round(
        &self,
        msg: &IncomingMessage,
        state: RoundState,
        number: Option<i64>,
    ) -> Result<Option<RoundRecord>, Settle> {
        match self.store.rounds_in(&msg.thread(), state).await {
            Ok(rounds) => Ok(rounds
                .into_iter()
                .find(|r| number.is_none_or(|n| r.round == n))),
            Err(e) => {
                tracing::error!(thread = %msg.thread(), "read the review rounds: {e}");
                Err(Settle::Failed)
            }
        }
    }

    /// The watcher opened a round: sort it and say it, once.
    pub(super) async fn review_round(
        &self,
        msg: &IncomingMessage,
        cancel: &CancellationToken,
    ) -> Settle {
        let thread = msg.thread();
        let round = match self.round(msg, RoundState::New, None).await {
            Ok(Some(round)) => round,
            Ok(None) => return Settle::Processed,
            Err(settle) => return settle,
        };
        let (text, state, sorted) = match round.kind {
            RoundKind::Checks => match self.store.round_checks(&thread, round.round).await {
                Ok(checks) => (
                    proposal::checks_message(&round.pr, &checks),
                    RoundState::Proposed,
                    Vec::new(),
                ),
                Err(e) => {
                    tracing::error!(thread = %thread, "read the round's checks: {e}");
                    return Settle::Failed;
                }
            },
            RoundKind::Review => {
                let read = async {
                    let comments = self.store.round_comments(&thread, round.round).await?;
                    let unheeded = self.store.round_unheeded(&thread, round.round).await?;
                    Ok::<_, crate::store::StoreError>((comments, unheeded))
                };
                let (comments, unheeded) = match read.await {
                    Ok(read) => read,
                    Err(e) => {
                        tracing::error!(thread = %thread, "read the round's comments: {e}");
                        return Settle::Failed;
                    }
                };
                if comments.is_empty() {
                    // Only people who may not steer: named, nothing sorted.
                    (
                        proposal::unheeded_message(&round.pr, &unheeded),
                        RoundState::Nothing,
                        Vec::new(),
                    )
                } else {
                    self.sort_round(&thread, &round, &comments, &unheeded, cancel)
                        .await
                }
            }
        };
        tracing::info!(
            tag = "PM",
            "thread {thread} → review round {} {}",
            round.round,
            state.as_str()
        );
        let changes = [
            Change::Review(ReviewChange::Sorted {
                thread: &thread,
                round: round.round,
                state,
                sorted: &sorted,
            }),
            Change::Processed(msg),
        ];
        self.said_once(msg, &text, &changes).await
    }

    /// The PM sorts what the review `round` gives of its `comments` (those of people who may
    /// steer): the thread's message, the round's new state and each comment given with its
    /// kind. The message also says what was left out or cut, and names the `unheeded`.
    async fn sort_round(
        &self,
        thread: &ThreadKey,
        round: &RoundRecord,
        comments: &[StoredComment],
        unheeded: &[String],
        cancel: &CancellationToken,
    ) -> (String, RoundState, Vec<(String, String)>) {
        let batch = review_input::batch(comments);
        let notes = [
            proposal::left_out_note(&batch),
            proposal::unheeded_note(unheeded),
        ];
        match sorting::sort(&self.pm, thread, round.pr.number, &batch, cancel).await {
            Ok(sorted) => {
                let (text, propose) = proposal::batch_message(&round.pr, &round.decision, &sorted);
                let keys = batch
                    .shown
                    .iter()
                    .zip(&sorted)
                    .map(|(c, s)| (c.comment.key.clone(), s.kind.as_str().to_owned()))
                    .collect();
                let state = if propose {
                    RoundState::Proposed
                } else {
                    RoundState::Nothing
                };
                (proposal::with_notes(text, &notes), state, keys)
            }
            Err(e) => {
                tracing::warn!(
                    thread = %thread,
                    "review round {}: {e}; reported without sorting",
                    round.round
                );
                (
                    proposal::with_notes(proposal::unsorted_message(&round.pr, &batch), &notes),
                    RoundState::Unsorted,
                    Vec::new(),
                )
            }
        }
    }

    /// The pull request reached `github.maxReviewRounds`: said once (the watcher stores
    /// this message once).
    pub(super) async fn review_capped(&self, msg: &IncomingMessage) -> Settle {
        let thread = msg.thread();
        let pr = match self.store.thread_record(&thread).await {
            Ok(Some(record)) => record.pull_request,
            Ok(None) => None,
            Err(e) => {
                tracing::error!(thread = %thread, "read the thread: {e}");
                return Settle::Failed;
            }
        };
        let Some(pr) = pr else {
            return Settle::Processed;
        };
        tracing::info!(tag = "PM", "thread {thread} → review rounds capped");
        self.answer(msg, Role::Pm, &proposal::capped_message(&pr))
            .await
    }

    /// *yes* to the proposed round `number`: a follow-up run with the comments (or the
    /// failed checks) as its task.
    pub(super) async fn approve_review(
        &self,
        msg: &IncomingMessage,
        number: i64,
        last: &RunRecord,
    ) -> Settle {
        let thread = msg.thread();
        let round = match self.round(msg, RoundState::Proposed, Some(number)).await {
            Ok(Some(round)) => round,
            Ok(None) => return Settle::Processed,
            Err(settle) => return settle,
        };
        let task = match round.kind {
            RoundKind::Review => self
                .store
                .round_comments(&thread, round.round)
                .await
                .map(|c| {
                    let batch = review_input::batch(&c);
                    proposal::coder_review_task(&round.pr, round.round, &msg.user, &batch)
                }),
            RoundKind::Checks => self
                .store
                .round_checks(&thread, round.round)
                .await
                .map(|c| proposal::coder_checks_task(&round.pr, &msg.user, &c)),
        };
        let task = match task {
            Ok(task) => task,
            Err(e) => {
                tracing::error!(thread = %thread, "read review round {number}: {e}");
                return Settle::Failed;
            }
        };
        let approved = Change::Review(ReviewChange::Approved {
            thread: &thread,
            round: number,
        });
        match self
            .outbox
            .commit(&[approved], &Effects::new(&thread))
            .await
        {
            Ok(true) => {}
            Ok(false) => return Settle::Processed,
            Err(e) => {
                tracing::error!(thread = %thread, "record the approval of review round {number}: {e}");
                return Settle::Failed;
            }
        }
        tracing::info!(
            tag = "CLD",
            "thread {thread} → {} approved review round {number}",
            msg.user
        );
        if let Err(e) = self.store.mark_run_start(msg, RunStart::FollowUp).await {
            tracing::error!(thread = %thread, "record the start of a run: {e}");
            return Settle::Failed;
        }
        match self.coder.resume_with(msg, last, task).await {
            Ok(()) => Settle::Processed,
            Err(e) => {
                tracing::error!(thread = %thread, "resume coder: {e}");
                let reply =
                    format!("I couldn't go on from my last run ({e}). Say **yes** again to retry.");
                let changes = [
                    Change::Review(ReviewChange::Unapproved {
                        thread: &thread,
                        round: number,
                    }),
                    Change::Processed(msg),
                ];
                self.reply(msg, Role::Coder, &reply, &changes).await
            }
        }
    }

    /// *no* to the proposed round `number`.
    pub(super) async fn decline_review(&self, msg: &IncomingMessage, number: i64) -> Settle {
        let thread = msg.thread();
        tracing::info!(
            tag = "PM",
            "thread {thread} → review round {number} declined"
        );
        let changes = [
            Change::Review(ReviewChange::Declined {
                thread: &thread,
                round: number,
            }),
            Change::Processed(msg),
        ];
        self.said_once(msg, proposal::DECLINED, &changes).await
    }

    /// Records `changes` with `text` as the PM's; when a guard finds it done already, the
    /// message is only marked processed.
    async fn said_once(&self, msg: &IncomingMessage, text: &str, changes: &[Change<'_>]) -> Settle {
        let effects = Effects::new(&msg.thread()).reply(text, &super::handler::speaker(Role::Pm));
        match self.outbox.commit(changes, &effects).await {
            Ok(true) => {
                // The round's outcome is one of the Journal's entries.
                self.refresh_description(&msg.thread());
                Settle::Settled
            }
            Ok(false) => Settle::Processed,
            Err(e) => {
                tracing::error!(thread = %msg.thread(), "record the reply to {}: {e}", msg.ts);
                Settle::Failed
            }
        }
    }
}
