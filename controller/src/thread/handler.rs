//! The handler of a thread's messages: read the thread's [`Facts`] once, [`classify`] the
//! message, apply the command, settle the message. Everything a thread does in answer to a
//! message starts here; what each command does lives beside it (`coder_commands`,
//! `plan_commands`, `pm_turn`, `artist_commands`, `researcher_turn`, `memory_commands`,
//! `review_commands`, `reviewer_commands`, `rebase_commands`).
//!
//! A person's voice notes are heard and shared files fetched before anything else
//! ([`super::senses`]), so the rules read what was said, not only what was typed.
//!
//! What handling a message changes and what it says in Slack are recorded together
//! ([`Outbox::commit`]): a crash before leaves the message pending and nothing said, a crash
//! after leaves it processed with its reply waiting in the outbox.

use async_trait::async_trait;
use tokio_util::sync::CancellationToken;

use crate::coder::SlackCoder;
use crate::config::{MergeChecks, MergeStrategy};
use crate::dispatch::MessageHandler;
use crate::domain::{IncomingMessage, Role, ThreadKey, ThreadState};
use crate::pm::Pm;
use crate::slack::effects::Effects;
use crate::slack::outbox::Outbox;
use crate::store::reviews::RoundState;
use crate::store::{Change, Store, ThreadStateError};
use crate::thread::close_plan::CloseKind;
use crate::thread::command::{Command, Facts, classify};
use crate::thread::permissions::Developers;
use crate::thread::replies;
use crate::thread::routing::other_roles_reply;
use crate::thread::state::thread_state;

/// Handles a thread's messages with the PM and the Coder.
#[derive(Debug)]
pub struct ThreadHandler {
    /// The repository's channel: a message elsewhere (a direct message, a mention in another
    /// channel) is a read-only conversation ([`crate::thread::conversation`]).
    pub channel: String,
    pub pm: Pm,
    pub outbox: Outbox,
    pub store: Store,
    /// Starts and reports Coder runs of approved plans.
    pub coder: SlackCoder,
    /// Who may ask for work; empty means everyone in the channel.
    pub allowed_users: Vec<String>,
    /// Who may steer the work (`access.developers`).
    pub developers: Developers,
    /// `coder.maxCostPerThread`: a thread's budget unless it sets its own.
    pub max_cost_per_thread: f64,
    /// The caps checked when a person starts a Coder run (`access.maxCostPerDay`,
    /// `.maxCostPerUserPerDay`, `.maxClaudeCallsPerHour`).
    pub caps: crate::gateway::caps::Caps,
    /// `github.mergeStrategy`: how "merge" merges the thread's pull request.
    pub merge_strategy: MergeStrategy,
    /// `github.mergeChecks`: what reviewers said that makes "merge" refuse.
    pub merge_checks: MergeChecks,
    /// Memory proposals and their commits.
    pub memory: crate::memory::Memory,
    /// The Artist: image prompts, drawings and their commits.
    pub artist: crate::artist::Artist,
    /// The reviewer model (`reviewer`); `None`: off.
    pub reviewer: Option<crate::config::ReviewerConfig>,
    /// The researcher's model (`researcher.model`).
    pub researcher_model: String,
    /// The rules and client of the controller's web fetches (`fetch`), the researcher's
    /// `fetch_url` among them.
    pub fetch: std::sync::Arc<crate::runners::fetch::FetchPolicy>,
}

/// What is left to record of a message once its command was applied.
#[derive(Debug, PartialEq)]
pub(super) enum Settle {
    /// Handled, with nothing to say: mark it processed.
    Processed,
    /// Handling failed: mark it failed, to be retried later.
    Failed,
    /// Nothing: recorded already (with its reply), or left pending on purpose (shutdown).
    Settled,
    /// A running Coder was to take it, but its run had ended: the thread's other rules apply.
    NotTaken,
}

/// Why a thread's state could not be read.
#[derive(Debug, thiserror::Error)]
pub(super) enum LoadError {
    #[error(transparent)]
    Stored(#[from] ThreadStateError),
    #[error("write the stored plan for its digest: {0}")]
    Digest(#[from] serde_json::Error),
}

#[async_trait]
impl MessageHandler for ThreadHandler {
    async fn handle(&self, msg: IncomingMessage, cancel: CancellationToken) {
        // Voice notes heard and files fetched first: every rule reads the transcript.
        let msg = match self.perceive(msg.clone(), &cancel).await {
            Ok(perceived) => perceived,
            Err(settle) => {
                self.settle(&msg, settle).await;
                return;
            }
        };
        if msg.channel != self.channel {
            let settle = self.converse(&msg, &cancel).await;
            self.settle(&msg, settle).await;
            return;
        }
        let settle = match self.facts(&msg).await {
            Ok(facts) => self.classify_and_apply(&msg, facts, &cancel).await,
            Err(e) => {
                tracing::error!(thread = %msg.thread(), "read the thread's state: {e}");
                Settle::Failed
            }
        };
        self.settle(&msg, settle).await;
    }

    /// A thread this instance takes from another instance of a shared store: a run start
    /// the other was cut off in is settled, its runs that stopped with it are reported,
    /// what it recorded but did not say is said, and the steps after its pull request that
    /// are not done yet are resumed (in the background, as after a start; each is recorded
    /// once, whoever finishes it).
    async fn adopt(&self, thread: &ThreadKey) {
        tracing::info!(thread = %thread, "this instance takes the thread");
        crate::reconcile::cut_off_starts_of(&self.coder, thread).await;
        self.coder.report_runs_of_taken_thread(thread).await;
        self.outbox.deliver(thread).await;
        let after_pr = self.coder.after_pr.clone();
        let thread = thread.clone();
        tokio::spawn(async move { after_pr.run(&thread).await });
    }

    async fn on_panic(&self, msg: IncomingMessage, panic: String) {
        let reply = format!(
            "Something broke while I worked on this ({panic}). It is logged; your message is saved and will be retried when you write again."
        );
        let settle = self
            .reply(&msg, Role::Pm, &reply, &[Change::Failed(&msg)])
            .await;
        self.settle(&msg, settle).await;
    }
}

impl ThreadHandler {
    /// Brings the description of the thread's open pull request up to date after a step
    /// (its Journal), in the background: one `gh pr edit` if its text changed.
    pub(super) fn refresh_description(&self, thread: &ThreadKey) {
        let after_pr = self.coder.after_pr.clone();
        let thread = thread.clone();
        tokio::spawn(async move { after_pr.refresh_description(&thread).await });
    }
}

impl ThreadHandler {
    /// Applies the command `msg` gives with `facts`; when the running Coder it was for had
    /// ended as it came, reads the thread's state again and applies what the rules after the
    /// running Coder's say.
    async fn classify_and_apply(
        &self,
        msg: &IncomingMessage,
        mut facts: Facts,
        cancel: &CancellationToken,
    ) -> Settle {
        let settle = self.apply(msg, classify(msg, &facts), cancel).await;
        if settle != Settle::NotTaken {
            return settle;
        }
        match self.load_state(msg).await {
            Ok(state) => {
                facts.state = state;
                facts.coder_missed = true;
                self.apply(msg, classify(msg, &facts), cancel).await
            }
            Err(e) => {
                tracing::error!(thread = %msg.thread(), "read the thread's state: {e}");
                Settle::Failed
            }
        }
    }

    /// What the rules need to know of the thread for `msg`, read once: whether its author is
    /// on the allow-list and a developer, the open memory proposal and review round (a failure to read either
    /// is logged and read as none open), and the thread's state.
    pub(super) async fn facts(&self, msg: &IncomingMessage) -> Result<Facts, LoadError> {
        let thread = msg.thread();
        let allowed = self.allows(&msg.user);
        let proposal_open = match self.store.open_memory_proposal(&thread).await {
            Ok(open) => open.is_some(),
            Err(e) => {
                tracing::error!(thread = %thread, "read the memory proposal: {e}");
                false
            }
        };
        let open_round = match self.store.rounds_in(&thread, RoundState::Proposed).await {
            Ok(rounds) => rounds.last().map(|r| r.round),
            Err(e) => {
                tracing::error!(thread = %thread, "read the review rounds: {e}");
                None
            }
        };
        let drawing = match self.store.open_drawing(&thread).await {
            Ok(open) => open.map(|d| (d.number, d.stage)),
            Err(e) => {
                tracing::error!(thread = %thread, "read the open drawing: {e}");
                None
            }
        };
        Ok(Facts {
            drawing,
            allowed,
            developer: self.developers.includes(&msg.user),
            state: self.load_state(msg).await?,
            open_round,
            proposal_open,
            coder_missed: false,
        })
    }

    /// Whether `user` may talk to CodeButler (`access.allowedUsers`; empty: everyone).
    pub(super) fn allows(&self, user: &str) -> bool {
        self.allowed_users.is_empty() || self.allowed_users.iter().any(|u| u == user)
    }

    /// The thread's state, read once for the message.
    async fn load_state(&self, msg: &IncomingMessage) -> Result<ThreadState, LoadError> {
        let thread = msg.thread();
        let stored = self.store.stored_thread(&thread).await?;
        let active = self.coder.supervisor.is_active(&thread.thread_ts);
        Ok(thread_state(stored, &thread, active)?)
    }

    /// Applies `command`; the one place every command's effects start.
    async fn apply(
        &self,
        msg: &IncomingMessage,
        command: Command,
        cancel: &CancellationToken,
    ) -> Settle {
        let thread = msg.thread();
        match command {
            Command::ClickNotAllowed => {
                tracing::info!(
                    tag = "PM",
                    "thread {thread} → button click by {}, who is not in access.allowedUsers",
                    msg.user
                );
                let reply = replies::click_not_allowed(&msg.user);
                self.answer(msg, Role::Pm, &reply).await
            }
            Command::NotAllowed => {
                tracing::info!(
                    tag = "PM",
                    "thread {thread} → {} is not in access.allowedUsers",
                    msg.user
                );
                self.answer(msg, Role::Pm, replies::NOT_ALLOWED).await
            }
            Command::DevelopersOnly(what) => {
                tracing::info!(
                    tag = "PM",
                    "thread {thread} → {} may not {what}: not in access.developers",
                    msg.user
                );
                let reply = replies::developers_only(&msg.user, what, &self.developers.mentions());
                self.answer(msg, Role::Pm, &reply).await
            }
            Command::ThreadClosed => {
                tracing::info!(tag = "PM", "thread {thread} → message in a closed thread");
                self.answer(msg, Role::Pm, replies::THREAD_CLOSED).await
            }
            Command::QuestionAfterClose => self.ask_pm_after_close(msg, cancel).await,
            Command::StopButton(click) => self.stop_button(msg, &click).await,
            Command::SpentClick => Settle::Processed,
            Command::EarlierPlanButton => self.answer(msg, Role::Pm, replies::EARLIER_PLAN).await,
            Command::ApproveButton(click) => match self.over_cap(msg).await {
                Some(refused) => refused,
                None => {
                    self.approve_button(msg, &click).await;
                    self.approve(msg).await
                }
            },
            Command::CancelButton(click) => self.cancel_button(msg, &click).await,
            Command::Undo => self.undo(msg).await,
            Command::SetBudget(cap) => self.set_budget(msg, cap).await,
            Command::StopCoder => self.stop_coder(msg).await,
            Command::ToRunningCoder => self.to_running_coder(msg).await,
            Command::CloseWhileCoderRuns => self.answer(msg, Role::Pm, replies::CODER_RUNS).await,
            Command::Merge { pr, anyway } => self.merge(msg, &pr, anyway).await,
            Command::NothingToMerge => self.answer(msg, Role::Pm, replies::NOTHING_TO_MERGE).await,
            Command::Abandon { pr } => self.close(msg, CloseKind::Abandon, pr.as_ref()).await,
            Command::Done => self.close(msg, CloseKind::Done, None).await,
            Command::EndedOnGitHub { event, pr } => self.ended_on_github(msg, event, &pr).await,
            Command::WatchLater => Settle::Processed,
            Command::Unreadable => {
                tracing::warn!(
                    ts = %msg.ts,
                    origin = msg.origin.as_str(),
                    "a stored message of the controller's own that cannot be read back; nothing done"
                );
                Settle::Processed
            }
            Command::Notice(notice) => self.answer(msg, Role::Pm, &notice).await,
            Command::Approve => match self.over_cap(msg).await {
                Some(refused) => refused,
                None => self.approve(msg).await,
            },
            Command::AlreadyCarriedOut => self.answer(msg, Role::Coder, replies::CARRIED_OUT).await,
            Command::FollowUp { last } => match self.over_cap(msg).await {
                Some(refused) => refused,
                None => self.follow_up(msg, &last).await,
            },
            Command::OtherRoles(named) => {
                let names: Vec<&str> = named.iter().map(|m| m.name()).collect();
                tracing::info!(
                    tag = "PM",
                    "thread {thread} → addressed to {}",
                    names.join(", ")
                );
                self.answer(msg, Role::Pm, &other_roles_reply(&named)).await
            }
            Command::AskPm => self.ask_pm(msg, cancel).await,
            Command::AskArtist => self.ask_artist(msg, cancel).await,
            Command::AskPmThenArtist => self.ask_pm_then_artist(msg, cancel).await,
            Command::Draw { number } => self.draw(msg, number).await,
            Command::UseDrawing { number, path } => {
                self.use_drawing(msg, number, path.as_deref()).await
            }
            Command::CancelDrawing { number } => self.cancel_drawing(msg, number).await,
            Command::AskResearcher => self.ask_researcher(msg, cancel).await,
            Command::ReviewRound => self.review_round(msg, cancel).await,
            Command::ReviewCapped => self.review_capped(msg).await,
            Command::ReviewerDue => self.reviewer_review(msg, cancel).await,
            Command::ApproveReview { round, last } => match self.over_cap(msg).await {
                Some(refused) => refused,
                None => self.approve_review(msg, round, &last).await,
            },
            Command::DeclineReview { round } => self.decline_review(msg, round).await,
            Command::MemoryReply(reply) => self.memory_reply(msg, reply).await,
            Command::CorrectAnswer { number, answer } => {
                self.correct_answer(msg, number, &answer).await
            }
            Command::Rebase { last, pr } => self.rebase(msg, &last, pr.as_ref(), cancel).await,
            Command::RebaseWhileCoderRuns => self.rebase_while_coder_runs(msg).await,
            Command::RebaseWhilePlanPending => self.rebase_while_plan_pending(msg).await,
            Command::NothingToRebase => self.nothing_to_rebase(msg).await,
        }
    }

    /// Records what is left of `msg`; a failure to record is logged (the message then stays
    /// as it was, and is handled again).
    async fn settle(&self, msg: &IncomingMessage, settle: Settle) {
        let thread = msg.thread();
        match settle {
            Settle::Settled => {}
            Settle::Processed => {
                if let Err(e) = self.store.mark_processed(msg).await {
                    tracing::error!(thread = %thread, "mark processed: {e}");
                }
            }
            Settle::Failed | Settle::NotTaken => {
                if settle == Settle::NotTaken {
                    tracing::error!(thread = %thread, "message {} was taken by no rule", msg.ts);
                }
                if let Err(e) = self.store.mark_failed(msg).await {
                    tracing::error!(thread = %thread, "mark message {} failed: {e}", msg.ts);
                }
            }
        }
    }

    /// Replies to `msg` as `role` and marks it processed.
    pub(super) async fn answer(&self, msg: &IncomingMessage, role: Role, markdown: &str) -> Settle {
        self.reply(msg, role, markdown, &[Change::Processed(msg)])
            .await
    }

    /// Records `changes` with a reply to `msg` as `role`.
    pub(super) async fn reply(
        &self,
        msg: &IncomingMessage,
        role: Role,
        markdown: &str,
        changes: &[Change<'_>],
    ) -> Settle {
        let effects = Effects::new(&msg.thread()).reply(markdown, &speaker(role));
        self.record(msg, changes, &effects).await
    }

    /// Records `changes` with `effects`: settled, or failed (logged) if that cannot be
    /// recorded, which leaves everything as it was.
    pub(super) async fn record(
        &self,
        msg: &IncomingMessage,
        changes: &[Change<'_>],
        effects: &Effects,
    ) -> Settle {
        match self.outbox.commit(changes, effects).await {
            Ok(_) => Settle::Settled,
            Err(e) => {
                tracing::error!(thread = %msg.thread(), "record the reply to {}: {e}", msg.ts);
                Settle::Failed
            }
        }
    }

    /// A reaction that needs no outbox: adding it again is harmless.
    pub(super) async fn react(&self, msg: &IncomingMessage, name: &str) {
        if let Err(e) = self
            .outbox
            .sender()
            .react(&msg.channel, &msg.ts, name)
            .await
        {
            tracing::warn!(thread = %msg.thread(), "react {name}: {e}");
        }
    }
}

/// The label in front of what `role` says in the thread.
pub(super) fn speaker(role: Role) -> String {
    format!("*{}:* ", role.label())
}
