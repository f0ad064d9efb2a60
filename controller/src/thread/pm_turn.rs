//! A message for the PM: its turn (which the messages typed meanwhile join,
//! [`super::joined_messages`]; the thread's status line says what it is doing meanwhile,
//! [`super::status_line`], or 👀 where Slack shows none; its answer is streamed as the
//! model writes it where Slack can, [`super::live_answer`]), recorded with its answer (and plan, with the plan's cost
//! estimate and Approve/Cancel buttons) and ✅, or the reason it could not answer. A
//! recorded plan starts its preparation ahead ([`crate::coder::ahead`]); a plain "no"
//! discards it. A
//! question in a closed thread gets a read-only turn ([`crate::pm::Pm::answer_read_only`])
//! whose answer ends with the closed thread's note.
//!
//! A message that links other threads, pull requests or issues first has them read
//! ([`crate::pm::references`]): what was read goes into the PM's conversation as a
//! read-only context block before the message, recorded with the thread's one line about it
//! and the step `references:<ts>`, so a retry or a restart neither reads them again nor
//! posts the line twice.
//!
//! When the Artist answers the message after the PM (the message mentions both, or the PM
//! handed it to the Artist with `ask_artist`, [`crate::pm::artist_handoff`]), the PM's turn
//! is recorded with the step `artist-next:<ts>` instead of the message being processed, and
//! the Artist's turn processes it: after a restart between the two, the message comes back,
//! the step skips the PM, and the Artist answers it once.

use std::time::Duration;

use tokio_util::sync::CancellationToken;

use codebutler_agent::conversation::ChatMessage;

use crate::domain::{IncomingMessage, Plan, Role};
use crate::gateway::budget::{cost_markdown, estimate};
use crate::gateway::caps;
use crate::gateway::{GatewayError, Tried, TriedOutcome};
use crate::pm::activity::Activity;
use crate::pm::artist_handoff::Handoff;
use crate::pm::references::{self, Sources};
use crate::pm::{Pm, PmError, PmTurn};
use crate::slack::effects::{Effects, MessageRef};
use crate::slack::interactive::{plan_blocks, plan_digest};
use crate::store::Change;
use crate::thread::handler::{Settle, ThreadHandler, speaker};
use crate::thread::joined_messages::JoinedMessages;
use crate::thread::live_answer::LiveAnswer;
use crate::thread::replies::{
    THREAD_CLOSED, answered_by_fallback, no_pm_model, plan_waits_for_developer,
};
use crate::thread::status_line::StatusLine;

/// Which PM turn a message gets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Access {
    /// Every tool: it may propose a plan.
    Full,
    /// A question about a closed thread's work: read-only tools, and the closed note after
    /// the answer.
    AfterClose,
    /// A conversation outside the repository's channel: read-only tools, told where work
    /// starts.
    Conversation,
}

/// Whether the Artist answers a message after the PM.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum ArtistNext {
    /// Never: the message is the PM's alone.
    No,
    /// When the PM hands it over (`ask_artist`, offered when the Artist can draw).
    IfHanded,
    /// Always: the message mentions both.
    Always,
}

/// What the thread reads when the PM handed a message to the Artist and wrote nothing else.
pub(super) const HANDING_TO_ARTIST: &str = "Handing this to the Artist.";

/// Recording the PM's turn failed.
#[derive(Debug, thiserror::Error)]
enum TurnError {
    #[error(transparent)]
    Outbox(#[from] crate::slack::outbox::OutboxError),
    #[error("write the plan for its buttons: {0}")]
    Plan(#[from] serde_json::Error),
}

impl ThreadHandler {
    /// The PM answers `msg`, and may hand it to the Artist.
    pub(super) async fn ask_pm(&self, msg: &IncomingMessage, cancel: &CancellationToken) -> Settle {
        self.pm_turn(msg, cancel, Access::Full, ArtistNext::IfHanded)
            .await
    }

    /// The PM answers `msg`, then the Artist (the message mentions both).
    pub(super) async fn ask_pm_then_artist(
        &self,
        msg: &IncomingMessage,
        cancel: &CancellationToken,
    ) -> Settle {
        self.pm_turn(msg, cancel, Access::Full, ArtistNext::Always)
            .await
    }

    /// While a daily spending cap is reached (the repository's, or that of the person who
    /// wrote `msg`) and `productManager.overBudget` names a model: the PM that answers with
    /// it, and the line that says so under the answer. `None`: the PM keeps its model (no
    /// such model, no cap reached, or caps that cannot be read, which stop no question).
    async fn over_budget(&self, msg: &IncomingMessage) -> Option<(Pm, String)> {
        let model = self.pm.over_budget.as_ref()?;
        let now = chrono::Utc::now();
        let reached = caps::spend_refusal(&self.store, self.caps, &msg.user, now).await?;
        let note = reached.over_budget_note(model, now)?;
        tracing::info!(
            tag = "PM",
            "thread {} → pm answers with {model}: {reached:?}",
            msg.thread()
        );
        let pm = Pm {
            model: model.clone(),
            ..self.pm.clone()
        };
        Some((pm, note))
    }

    /// The PM with the model the thread's people chose (`/codebutler pm <model>`), if they
    /// chose one; a failure to read it is logged and the PM keeps its model.
    async fn chosen_pm(&self, msg: &IncomingMessage) -> Option<Pm> {
        let chosen = match self.store.thread_pm_model(&msg.thread()).await {
            Ok(chosen) => chosen?,
            Err(e) => {
                tracing::warn!(thread = %msg.thread(), "read the thread's pm model: {e}");
                return None;
            }
        };
        Some(Pm {
            model: chosen.model,
            ..self.pm.clone()
        })
    }

    /// The PM answers a message of a conversation outside the repository's channel, read-only.
    pub(super) async fn ask_pm_in_conversation(
        &self,
        msg: &IncomingMessage,
        cancel: &CancellationToken,
    ) -> Settle {
        self.pm_turn(msg, cancel, Access::Conversation, ArtistNext::No)
            .await
    }

    /// The PM answers a question about a closed thread's work, read-only.
    pub(super) async fn ask_pm_after_close(
        &self,
        msg: &IncomingMessage,
        cancel: &CancellationToken,
    ) -> Settle {
        self.pm_turn(msg, cancel, Access::AfterClose, ArtistNext::No)
            .await
    }

    async fn pm_turn(
        &self,
        msg: &IncomingMessage,
        cancel: &CancellationToken,
        access: Access,
        next: ArtistNext,
    ) -> Settle {
        let thread = msg.thread();
        let artist_step = format!("artist-next:{}", msg.ts);
        if next != ArtistNext::No {
            // The PM answered before a restart: only the Artist's turn is left.
            match self.store.step_done(&thread, &artist_step).await {
                Ok(true) => return self.ask_artist(msg, cancel).await,
                Ok(false) => {}
                Err(e) => {
                    tracing::error!(thread = %thread, "read whether the PM answered {} before the Artist: {e}", msg.ts);
                    return Settle::Failed;
                }
            }
        }
        // `ask_artist` is the PM's only when the Artist can draw and would not answer anyway.
        let handoff =
            (next == ArtistNext::IfHanded && self.artist.can_draw()).then(Handoff::default);
        // A plan prepared ahead stays while its thread talks; a plain "no" withdraws it.
        if access == Access::Full && crate::thread::approval::is_decline(&msg.text) {
            self.coder
                .ahead
                .discard(&thread.thread_ts, "the plan was declined");
        }
        self.coder.ahead.touch(&thread.thread_ts);
        // The thread's status line says the PM works on it; 👀 where Slack shows none.
        let status = StatusLine::start(self.outbox.sender(), &thread).await;
        if !status.shown() {
            self.react(msg, "eyes").await;
        }
        // Its voice notes were heard and its files fetched before it was classified
        // ([`super::senses`]): `msg` carries the transcript.
        if let Err(settle) = self.say_files_read(msg).await {
            status.clear().await;
            return settle;
        }
        if let Err(settle) = self.read_references(msg).await {
            status.clear().await;
            return settle;
        }
        // The answer streamed into the thread as the model writes it, where Slack can.
        let watch = TurnWatch {
            live: LiveAnswer::begin(self.outbox.sender(), &self.store, msg).await,
            status,
        };
        // Messages typed while the PM works join this turn.
        let joined = JoinedMessages::new(self, msg);
        // A reached cap's model wins over the thread's own choice, which wins over the default.
        let over_budget = self.over_budget(msg).await;
        let chosen = self.chosen_pm(msg).await;
        let pm = match (&over_budget, &chosen) {
            (Some((pm, _)), _) | (None, Some(pm)) => pm,
            (None, None) => &self.pm,
        };
        let answered = match access {
            Access::Full => {
                tracing::info!(tag = "PM", "thread {thread} → pm responding");
                pm.answer(msg, &joined, &watch, cancel, handoff.as_ref())
                    .await
            }
            Access::AfterClose => {
                tracing::info!(
                    tag = "PM",
                    "thread {thread} → pm responding read-only (the thread is closed)"
                );
                pm.answer_read_only(msg, &watch, cancel)
                    .await
                    .map(|turn| PmTurn {
                        answer: format!("{}\n\n{THREAD_CLOSED}", turn.answer.trim_end()),
                        ..turn
                    })
            }
            Access::Conversation => {
                tracing::info!(
                    tag = "PM",
                    "thread {thread} → pm responding read-only (outside the channel)"
                );
                pm.answer_in_conversation(msg, &watch, cancel, &self.channel)
                    .await
            }
        };
        let TurnWatch { status, live } = watch;
        // Where the answer goes: the streamed message, if there is one.
        let onto = match live {
            Some(live) => live.finish().await,
            None => None,
        };
        let turn = match answered {
            Ok(turn) => turn,
            Err(PmError::Cancelled) => {
                status.clear().await;
                tracing::warn!(thread = %thread, "pm cancelled by shutdown; message kept for the next start");
                return Settle::Settled;
            }
            Err(PmError::Model(e)) => {
                tracing::error!(thread = %thread, "pm model call failed: {e}");
                let reply = match &e {
                    GatewayError::NoModelAnswered(tried) => no_pm_model(&short_reasons(tried)),
                    _ => format!(
                        "I couldn't reach the model ({}). Your message is saved: I'll try it again when you next write in this thread, or when I restart.",
                        short_reason(&e)
                    ),
                };
                return self
                    .reply_onto(msg, &reply, onto, &[Change::Failed(msg)])
                    .await;
            }
            Err(PmError::Attachment(e)) => {
                tracing::error!(thread = %thread, "pm shared files: {e}");
                let reply = "Something went wrong on my side reading the files shared here; your message is saved and will be retried.";
                return self
                    .reply(msg, Role::Pm, reply, &[Change::Failed(msg)])
                    .await;
            }
            Err(PmError::Store(e)) => {
                tracing::error!(thread = %thread, "pm store error: {e}");
                let reply = "Something went wrong on my side reading this thread's history; your message is saved and will be retried.";
                return self
                    .reply_onto(msg, reply, onto, &[Change::Failed(msg)])
                    .await;
            }
        };
        if turn.plan.is_some() {
            tracing::info!(tag = "PM", "thread {thread} → plan proposed");
        }
        let turn = match &turn.fallback {
            Some(fallback) => PmTurn {
                answer: format!(
                    "{}\n\n{}",
                    turn.answer.trim_end(),
                    answered_by_fallback(fallback, &pm.model)
                ),
                ..turn
            },
            None => turn,
        };
        let turn = match &over_budget {
            Some((_, note)) => PmTurn {
                answer: format!("{}\n\n{note}", turn.answer.trim_end()),
                ..turn
            },
            None => turn,
        };
        let handed = handoff.as_ref().and_then(Handoff::request);
        let turn = match &handed {
            Some(request) => {
                tracing::info!(
                    tag = "PM",
                    "thread {thread} → handed to the artist: {}",
                    preview(request)
                );
                PmTurn {
                    answer: if turn.answer.trim().is_empty() {
                        HANDING_TO_ARTIST.to_owned()
                    } else {
                        turn.answer
                    },
                    ..turn
                }
            }
            None => turn,
        };
        let artist_next = next == ArtistNext::Always || handed.is_some();
        let after = artist_next.then_some(artist_step.as_str());
        let joined = joined.joined();
        if let Err(e) = self
            .complete_turn(msg, &joined, &turn, onto, after, cancel)
            .await
        {
            tracing::error!(thread = %thread, "store pm turn: {e}; nothing was posted, the message will be answered again");
            status.clear().await;
            return Settle::Failed;
        }
        if let Some(plan) = &turn.plan {
            // Prepared while the plan is discussed, so an approval only hands over the task.
            self.coder.ahead.propose(&thread, &plan.summary);
        }
        tracing::info!(
            tag = "RSP",
            "pm: {:?} ({} tool calls)",
            preview(&turn.answer),
            turn.tool_calls
        );
        if artist_next {
            return self.ask_artist(msg, cancel).await;
        }
        Settle::Settled
    }

    /// Tells the thread, once (the step `files:<ts>`), which of the files shared on `msg`
    /// (fetched before, [`super::senses`]) were not read and why, and whether the PM's model
    /// cannot see its images. Only failing to read or record fails the message.
    async fn say_files_read(&self, msg: &IncomingMessage) -> Result<(), Settle> {
        let thread = msg.thread();
        let attachments = &self.pm.attachments;
        let step = format!("files:{}", msg.ts);
        match self.store.step_done(&thread, &step).await {
            Ok(false) => {}
            Ok(true) => return Ok(()),
            Err(e) => {
                tracing::error!(thread = %thread, "read whether message {} had its files read: {e}", msg.ts);
                return Err(Settle::Failed);
            }
        }
        let gateway = &self.pm.gateway;
        let sees_images = gateway.sees_images(&self.pm.model).await;
        let image_models = if sees_images {
            Vec::new()
        } else {
            attachments.image_models(gateway).await
        };
        let line = match attachments
            .line(&self.store, msg, &self.pm.model, sees_images, &image_models)
            .await
        {
            Ok(Some(line)) => line,
            Ok(None) => return Ok(()),
            Err(e) => {
                tracing::error!(thread = %thread, "read the files of message {}: {e}", msg.ts);
                return Err(Settle::Failed);
            }
        };
        let changes = [Change::StepDone {
            thread: &thread,
            step: &step,
        }];
        let effects = Effects::new(&thread).reply(&line, "");
        match self.outbox.commit(&changes, &effects).await {
            Ok(_) => Ok(()),
            Err(e) => {
                tracing::error!(thread = %thread, "record the files read for message {}: {e}", msg.ts);
                Err(Settle::Failed)
            }
        }
    }

    /// Reads the threads, pull requests and issues `msg` links, once: what was read is
    /// appended to the PM's conversation (before `msg` itself) with the thread's line about
    /// it. A reference that cannot be read is said in the line; only failing to record
    /// fails the message (to be handled again).
    async fn read_references(&self, msg: &IncomingMessage) -> Result<(), Settle> {
        let detected = references::detect(&msg.text);
        if detected.references.is_empty() {
            return Ok(());
        }
        let thread = msg.thread();
        let step = format!("references:{}", msg.ts);
        match self.store.step_done(&thread, &step).await {
            Ok(false) => {}
            Ok(true) => return Ok(()),
            Err(e) => {
                tracing::error!(thread = %thread, "read whether message {} had its links read: {e}", msg.ts);
                return Err(Settle::Failed);
            }
        }
        let sources = Sources {
            slack: self.outbox.sender(),
            gh: &self.pm.gh,
            repo: &self.pm.layout.repo,
        };
        let outcomes = references::read(&detected, &thread, sources).await;
        let rendered = references::render(&outcomes, detected.dropped);
        let Some(line) = rendered.line else {
            // Only links to this very thread: nothing to read or say.
            return Ok(());
        };
        tracing::info!(tag = "PM", "thread {thread} → {}", preview(&line));
        let context: Vec<ChatMessage> = rendered
            .context
            .into_iter()
            .map(ChatMessage::user)
            .collect();
        let mut changes = vec![Change::StepDone {
            thread: &thread,
            step: &step,
        }];
        if !context.is_empty() {
            changes.push(Change::Turn {
                thread: &thread,
                role: crate::pm::ROLE,
                messages: &context,
            });
        }
        let effects = Effects::new(&thread).reply(&line, "");
        match self.outbox.commit(&changes, &effects).await {
            Ok(_) => Ok(()),
            Err(e) => {
                tracing::error!(thread = %thread, "record the links read for message {}: {e}", msg.ts);
                Err(Settle::Failed)
            }
        }
    }

    /// Records the PM's turn with its answer (or plan) and ✅ on `msg` and on the messages
    /// that `joined` the turn, all handled together, retrying briefly: until it is recorded
    /// nothing was said, so a failure leaves every one of them to be answered again. With
    /// `artist_step`, `msg` is left for the Artist's turn: the step is recorded instead of
    /// the message being processed.
    async fn complete_turn(
        &self,
        msg: &IncomingMessage,
        joined: &[IncomingMessage],
        turn: &PmTurn,
        onto: Option<MessageRef>,
        artist_step: Option<&str>,
        cancel: &CancellationToken,
    ) -> Result<(), TurnError> {
        let thread = msg.thread();
        let mut effects = match &turn.plan {
            Some(plan) => self.plan_effects(msg, &turn.answer, plan, cancel).await?,
            None => Effects::new(&thread).reply(&turn.answer, &speaker(Role::Pm)),
        };
        if let Some(message) = onto {
            effects = effects.first_post_onto(message);
        }
        let mut effects = effects.react(&msg.ts, "white_check_mark");
        for other in joined {
            effects = effects.react(&other.ts, "white_check_mark");
        }
        let mut changes = vec![
            Change::Turn {
                thread: &thread,
                role: Role::Pm.as_str(),
                messages: &turn.new_messages,
            },
            match artist_step {
                Some(step) => Change::StepDone {
                    thread: &thread,
                    step,
                },
                None => Change::Processed(msg),
            },
        ];
        changes.extend(joined.iter().map(Change::Processed));
        let mut attempt = 0;
        loop {
            match self.outbox.commit(&changes, &effects).await {
                Err(e) if attempt < 3 => {
                    tracing::warn!(thread = %thread, "store pm turn: {e}; retrying");
                    attempt += 1;
                    tokio::time::sleep(Duration::from_millis(200 * attempt)).await;
                }
                result => return Ok(result.map(|_| ())?),
            }
        }
    }

    /// The PM's answer with its plan, the plan's cost estimate and budget, its overlaps with
    /// other active threads ([`crate::coordination::Coordination::plan_block`]), and the
    /// Approve/Cancel buttons (carrying the digest of the plan's stored form).
    pub(super) async fn plan_effects(
        &self,
        msg: &IncomingMessage,
        answer: &str,
        plan: &Plan,
        cancel: &CancellationToken,
    ) -> Result<Effects, serde_json::Error> {
        let thread = msg.thread();
        let cap = match self.store.thread_budget(&thread).await {
            Ok(cap) => cap.unwrap_or(self.max_cost_per_thread),
            Err(e) => {
                tracing::warn!(thread = %thread, "read the thread's budget: {e}");
                self.max_cost_per_thread
            }
        };
        let model = &self.coder.supervisor.limits().model;
        let estimate = estimate(&self.store, &self.pm.gateway, model).await;
        let mut cost_line = cost_markdown(&estimate, cap);
        let overlaps = self
            .coder
            .coordination
            .plan_block(&thread, plan, cancel)
            .await;
        if !overlaps.is_empty() {
            cost_line = format!("{cost_line}\n\n{overlaps}");
        }
        let mut markdown = format!("{answer}\n\n{}", plan.proposal_markdown(&cost_line));
        if !self.developers.includes(&msg.user) {
            let waits = plan_waits_for_developer(&self.developers.mentions());
            markdown = format!("{markdown}\n\n{waits}");
        }
        let digest = plan_digest(&plan.to_json()?);
        Ok(
            Effects::new(&thread).reply_with_blocks(&markdown, &speaker(Role::Pm), |text| {
                plan_blocks(text, &digest)
            }),
        )
    }
}

impl ThreadHandler {
    /// The PM's `reply` to `msg` with `changes`, its first message landing `onto` the
    /// streamed one if there is one.
    async fn reply_onto(
        &self,
        msg: &IncomingMessage,
        reply: &str,
        onto: Option<MessageRef>,
        changes: &[Change<'_>],
    ) -> Settle {
        let mut effects = Effects::new(&msg.thread()).reply(reply, &speaker(Role::Pm));
        if let Some(message) = onto {
            effects = effects.first_post_onto(message);
        }
        self.record(msg, changes, &effects).await
    }
}

/// What watches a PM turn: the thread's status line, and the streamed answer if any.
struct TurnWatch<'a> {
    status: StatusLine<'a>,
    live: Option<LiveAnswer>,
}

#[async_trait::async_trait]
impl Activity for TurnWatch<'_> {
    async fn doing(&self, status: &str) {
        self.status.doing(status).await;
    }

    fn watches_text(&self) -> bool {
        self.live.is_some()
    }

    fn wrote(&self, delta: &str) {
        if let Some(live) = &self.live {
            live.wrote(delta);
        }
    }
}

/// The first line of a text, cut to 80 characters, for log lines.
pub(super) fn preview(text: &str) -> String {
    let line = text.lines().next().unwrap_or_default();
    let mut out: String = line.chars().take(80).collect();
    if out.len() < text.len() {
        out.push('…');
    }
    out
}

/// A short, person-readable reason for a gateway failure.
fn short_reason(e: &GatewayError) -> String {
    match e {
        GatewayError::RetriesExhausted { attempts, last } => {
            format!("{} after {attempts} attempts", short_reason(last))
        }
        GatewayError::Http { status: 429, .. } => "rate limited by the provider".into(),
        GatewayError::Http { status, .. } => format!("the provider answered HTTP {status}"),
        GatewayError::Timeout(d) => format!("no answer within {}s", d.as_secs()),
        GatewayError::Transport(_) => "the provider is unreachable".into(),
        GatewayError::Decode(_) => "the provider's answer was unreadable".into(),
        GatewayError::Cancelled => "cancelled".into(),
        GatewayError::NoModelAnswered(tried) => short_reasons(tried),
    }
}

/// Each model a call could not get an answer from, with a short reason: "`a`: the provider
/// answered HTTP 503 after 3 attempts; `b`: failing, skipped for 280 s".
fn short_reasons(tried: &[Tried]) -> String {
    tried
        .iter()
        .map(|t| match &t.outcome {
            TriedOutcome::Failed(e) => format!("`{}`: {}", t.model, short_reason(e)),
            TriedOutcome::Skipped(left) => format!(
                "`{}`: failing, skipped for {} s more",
                t.model,
                left.as_secs()
            ),
        })
        .collect::<Vec<_>>()
        .join("; ")
}
