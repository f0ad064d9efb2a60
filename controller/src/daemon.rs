//! The daemon: wires configuration, store, Slack, the model gateway, thread dispatch and the
//! PM together, runs until a shutdown signal, then stops in order — stop taking messages,
//! let work in flight finish within a bound, close the store.
//!
//! At start, before anything can start a run, it sorts out what the last stop cut off
//! ([`crate::reconcile`]); once connected it delivers what the outbox still holds and
//! answers the messages still pending. Everything it says in Slack goes through the outbox
//! ([`crate::slack::outbox`]), recorded with the change it reports.

use std::future::Future;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use codebutler_agent::tools::path::RepoRoot;
use slack_morphism::prelude::{SlackInteractionEvent, SlackPushEventCallback};
use tokio_util::sync::CancellationToken;

use crate::coder::SlackCoder;
use crate::config::Config;
use crate::domain::IncomingMessage;
use crate::gateway::{Gateway, GatewayError};
use crate::layout::Layout;
use crate::pm::{Pm, PmError, PmTurn};
use crate::runners;
use crate::slack::api::{Sender, auth_test, build_client};
use crate::slack::effects::{Effects, MessageRef};
use crate::slack::intake::{Intake, IntakeFilter, classify};
use crate::slack::outbox::{Outbox, OutboxError};
use crate::slack::socket::{EventSink, SocketMode};
use crate::store::{Change, RunStart, Store};
use crate::thread::approval::{is_approval, is_stop, is_undo};
use crate::thread::dispatch::{Dispatcher, IDLE_TIMEOUT, MessageHandler};
use crate::thread::routing::{Route, mentioned_roles, other_roles_reply, route};

/// How long shutdown waits for work in flight.
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(30);
const PM_PREFIX: &str = "*PM:* ";
const CODER_PREFIX: &str = "*Coder:* ";

/// A failure that stops the daemon from starting.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error(transparent)]
    Store(#[from] crate::store::StoreError),
    #[error(transparent)]
    Slack(#[from] crate::slack::api::SlackError),
    #[error("connect to Slack Socket Mode: {0}")]
    Socket(String),
    #[error("set up the model gateway: {0}")]
    Gateway(#[from] GatewayError),
    #[error("set up runners: {0}")]
    Runners(String),
    #[error("open repository {path}: {source}")]
    Repo {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// Runs the daemon for the repository at `layout` (already set up with [`Layout::init`])
/// until `shutdown` completes.
pub async fn run(
    layout: Layout,
    config: Config,
    shutdown: impl Future<Output = ()>,
) -> Result<(), StartError> {
    let store = Store::open(&layout.store()).await?;
    let client = build_client(&config.slack.api_url)?;
    let bot = auth_test(&client, &config.slack.bot_token).await?;
    tracing::info!("slack bot user {} in team {}", bot.user_id, bot.team_id);
    let sender = Sender::new(
        client.clone(),
        &config.slack.bot_token,
        config.slack.messages_per_second,
    );
    let outbox = Outbox::new(store.clone(), sender);
    let gateway = Arc::new(Gateway::new(&config.openrouter, store.clone())?);
    let supervisor = runners::supervisor_for(&layout, &config, store.clone(), gateway.clone())
        .await
        .map_err(StartError::Runners)?;
    let root = RepoRoot::new(&layout.repo).map_err(|source| StartError::Repo {
        path: layout.repo.clone(),
        source,
    })?;
    let pm = Pm {
        layout: layout.clone(),
        root: Arc::new(root),
        store: store.clone(),
        gateway,
        model: config.product_manager.default_model().to_owned(),
        gh: PathBuf::from(&config.github.cli),
    };
    let coder = SlackCoder {
        supervisor: supervisor.clone(),
        layout: layout.clone(),
        outbox: outbox.clone(),
        store: store.clone(),
        prepare: crate::workspace::preparer_for(&layout, &config).map_err(StartError::Runners)?,
        pm: pm.clone(),
    };
    // Before anything can start a run: what the last stop cut off.
    crate::reconcile::after_stop(&coder).await;
    let admin_stop = CancellationToken::new();
    let admin = tokio::spawn(crate::admin::server::serve(
        crate::admin::server::AdminService {
            supervisor: supervisor.clone(),
            layout: layout.clone(),
        },
        admin_stop.clone(),
    ));
    let handler = Arc::new(PmHandler {
        pm,
        coder,
        outbox: outbox.clone(),
        store: store.clone(),
        allowed_users: config.access.allowed_users.clone(),
        max_cost_per_thread: config.coder.max_cost_per_thread,
    });
    let dispatcher = Dispatcher::new(store.clone(), handler.clone(), IDLE_TIMEOUT);
    let sink = Arc::new(IntakeSink {
        filter: IntakeFilter {
            channel: config.slack.channel_id.clone(),
            bot_user_id: bot.user_id,
        },
        store: store.clone(),
        dispatcher: dispatcher.clone(),
    });
    let socket = SocketMode::start(client, &config.slack.app_token, sink)
        .await
        .map_err(|e| StartError::Socket(e.to_string()))?;
    // Effects the last stop left undelivered, in the background: a thread whose outcome is
    // unknown is read first, and Slack rate-limits that.
    tokio::spawn(async move {
        let threads = outbox.recover().await;
        if threads > 0 {
            tracing::info!("delivered what the outbox held for {threads} thread(s)");
        }
    });
    let resumed = dispatcher.resume_pending().await?;
    if resumed > 0 {
        tracing::info!("resuming {resumed} thread(s) with unanswered messages");
    }
    tracing::info!(
        "listening in channel {} (pm model {})",
        config.slack.channel_id,
        config.product_manager.default_model()
    );

    shutdown.await;
    tracing::info!("shutting down: no new messages; finishing work in flight");
    socket.shutdown().await;
    dispatcher.shutdown(SHUTDOWN_GRACE).await;
    supervisor.shutdown().await;
    admin_stop.cancel();
    match admin.await {
        Ok(Err(e)) => tracing::warn!("admin socket: {e}"),
        Err(e) => tracing::warn!("admin socket task: {e}"),
        Ok(Ok(())) => {}
    }
    store.close().await;
    tracing::info!("stopped");
    Ok(())
}

/// Stores accepted events before they are acknowledged and wakes their thread.
struct IntakeSink {
    filter: IntakeFilter,
    store: Store,
    dispatcher: Dispatcher,
}

#[async_trait]
impl EventSink for IntakeSink {
    async fn accept(&self, event: SlackPushEventCallback) -> Result<(), String> {
        let msg = match classify(&event, &self.filter) {
            Intake::Accept(msg) => msg,
            Intake::Ignore(reason) => {
                tracing::debug!(event = %event.event_id.0, "ignored event: {reason}");
                return Ok(());
            }
        };
        let new = self
            .store
            .record_message(&msg)
            .await
            .map_err(|e| format!("store message {}: {e}", msg.ts))?;
        if !new {
            tracing::debug!(event = %event.event_id.0, "duplicate delivery of message {}", msg.ts);
            return Ok(());
        }
        tracing::info!(tag = "MSG", "{}: {:?}", msg.user, preview(&msg.text));
        self.dispatcher.notify(&msg.thread());
        Ok(())
    }

    /// A button click is stored as a message of its thread, exactly like a typed one.
    async fn accept_interaction(&self, event: SlackInteractionEvent) -> Result<(), String> {
        let msg = match crate::slack::interactive::classify(&event, &self.filter) {
            Intake::Accept(msg) => msg,
            Intake::Ignore(reason) => {
                tracing::debug!("ignored interaction: {reason}");
                return Ok(());
            }
        };
        let new = self
            .store
            .record_message(&msg)
            .await
            .map_err(|e| format!("store button click {}: {e}", msg.ts))?;
        if new {
            tracing::info!(tag = "MSG", "{}: clicked a button", msg.user);
            self.dispatcher.notify(&msg.thread());
        }
        Ok(())
    }
}

/// Handles a thread's messages with the PM.
///
/// What handling a message changes and what it says in Slack are recorded together
/// ([`Outbox::commit`]): a crash before leaves the message pending and nothing said, a crash
/// after leaves it processed with its reply waiting in the outbox.
struct PmHandler {
    pm: Pm,
    outbox: Outbox,
    store: Store,
    /// Starts and reports Coder runs of approved plans.
    coder: SlackCoder,
    /// Who may ask for work; empty means everyone in the channel.
    allowed_users: Vec<String>,
    /// `coder.maxCostPerThread`: a thread's budget unless it sets its own.
    max_cost_per_thread: f64,
}

impl PmHandler {
    /// Records `changes` with a `*PM:*` reply to `msg`. Returns whether it was recorded.
    async fn say(&self, msg: &IncomingMessage, changes: &[Change<'_>], markdown: &str) -> bool {
        self.say_as(msg, changes, markdown, PM_PREFIX).await
    }

    /// Records `changes` with a `*Coder:*` reply to `msg`.
    async fn say_coder(
        &self,
        msg: &IncomingMessage,
        changes: &[Change<'_>],
        markdown: &str,
    ) -> bool {
        self.say_as(msg, changes, markdown, CODER_PREFIX).await
    }

    async fn say_as(
        &self,
        msg: &IncomingMessage,
        changes: &[Change<'_>],
        markdown: &str,
        prefix: &str,
    ) -> bool {
        let effects = Effects::new(&msg.thread()).reply(markdown, prefix);
        self.record(msg, changes, &effects).await
    }

    /// Records `changes` with `effects`; a failure is logged and leaves `msg` as it was.
    async fn record(
        &self,
        msg: &IncomingMessage,
        changes: &[Change<'_>],
        effects: &Effects,
    ) -> bool {
        match self.outbox.commit(changes, effects).await {
            Ok(_) => true,
            Err(e) => {
                tracing::error!(thread = %msg.thread(), "record the reply to {}: {e}", msg.ts);
                false
            }
        }
    }

    /// Replies to `msg` and marks it processed, or failed if that cannot be recorded.
    async fn answer(&self, msg: &IncomingMessage, markdown: &str) {
        self.answer_as(msg, markdown, PM_PREFIX).await;
    }

    /// Replies to `msg` as the Coder and marks it processed, or failed.
    async fn answer_coder(&self, msg: &IncomingMessage, markdown: &str) {
        self.answer_as(msg, markdown, CODER_PREFIX).await;
    }

    async fn answer_as(&self, msg: &IncomingMessage, markdown: &str, prefix: &str) {
        let changes = [Change::Processed(msg)];
        if !self.say_as(msg, &changes, markdown, prefix).await {
            self.settle_failed(msg).await;
        }
    }

    /// A reaction that needs no outbox: adding it again is harmless.
    async fn react(&self, msg: &IncomingMessage, name: &str) {
        if let Err(e) = self
            .outbox
            .sender()
            .react(&msg.channel, &msg.ts, name)
            .await
        {
            tracing::warn!(thread = %msg.thread(), "react {name}: {e}");
        }
    }

    /// A message in a thread whose Coder is running: "stop" stops it; while the Coder waits
    /// for people to answer its question, the message is the answer; anything else reaches
    /// it before its next turn. Returns false if the run ended meanwhile (the PM takes it).
    async fn to_running_coder(&self, msg: &IncomingMessage) -> bool {
        let thread = &msg.thread_ts;
        let taken = if is_stop(&msg.text) {
            let reason = format!("stopped in Slack by <@{}>", msg.user);
            let stopped = self.coder.supervisor.cancel(thread, &reason).await;
            if stopped {
                self.react(msg, "octagonal_sign").await;
            }
            stopped
        } else if let Some(answered) =
            crate::pm::questions::answer_from_thread(&self.coder.supervisor, &self.store, msg).await
        {
            if answered {
                self.react(msg, "incoming_envelope").await;
            }
            answered
        } else {
            let passed = self
                .coder
                .supervisor
                .message(thread, &msg.text, &msg.user)
                .await;
            if passed {
                tracing::info!(tag = "CLD", "thread {thread} → message passed to the coder");
                self.react(msg, "incoming_envelope").await;
            }
            passed
        };
        if taken {
            self.done(msg).await;
        }
        taken
    }

    /// An approval of the thread's pending plan: starts the Coder (at most once). The
    /// message stays pending until the run is started and announced; a crash meanwhile is
    /// sorted out at the next start ([`crate::reconcile`]).
    async fn approve(&self, msg: &IncomingMessage) {
        let thread = msg.thread();
        let plan = match self.store.approve_plan(&thread, msg).await {
            Ok(Some(plan)) => plan,
            Ok(None) => {
                // Approved a moment ago by someone else: nothing more to start.
                self.done(msg).await;
                return;
            }
            Err(e) => {
                tracing::error!(thread = %thread, "approve plan: {e}");
                self.settle_failed(msg).await;
                return;
            }
        };
        tracing::info!(
            tag = "INF",
            "thread {thread} → approved by {}, starting coder",
            msg.user
        );
        self.approve_budget(msg).await;
        let approval = crate::slack::interactive::reaction_target(msg);
        match self.coder.start(&approval, &plan).await {
            Ok(()) => self.done(msg).await,
            Err(failure) => {
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
                if !self.say(msg, &changes, &reply).await {
                    self.settle_failed(msg).await;
                }
            }
        }
    }

    /// A message after the thread's run ended: a new run goes on from it.
    async fn follow_up(&self, msg: &IncomingMessage, last: &crate::domain::RunRecord) {
        tracing::info!(
            tag = "CLD",
            "thread {} → {} follows up on run {}",
            msg.thread(),
            msg.user,
            last.id
        );
        if let Err(e) = self.store.mark_run_start(msg, RunStart::FollowUp).await {
            tracing::error!(thread = %msg.thread(), "record the start of a run: {e}");
            self.settle_failed(msg).await;
            return;
        }
        match self.coder.resume(msg, last).await {
            Ok(()) => self.done(msg).await,
            Err(e) => {
                tracing::error!(thread = %msg.thread(), "resume coder: {e}");
                let reply = format!("I couldn't go on from my last run ({e}).");
                self.answer_coder(msg, &reply).await;
            }
        }
    }

    /// "undo" in a thread that has had a run.
    async fn undo(&self, msg: &IncomingMessage) {
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
        if !self.say_coder(msg, &changes, &undo.reply).await {
            self.settle_failed(msg).await;
        }
    }

    async fn done(&self, msg: &IncomingMessage) {
        if let Err(e) = self.store.mark_processed(msg).await {
            tracing::error!(thread = %msg.thread(), "mark processed: {e}");
        }
    }

    async fn settle_failed(&self, msg: &IncomingMessage) {
        if let Err(e) = self.store.mark_failed(msg).await {
            tracing::error!(thread = %msg.thread(), "mark message {} failed: {e}", msg.ts);
        }
    }

    /// Records the PM's turn with its answer (or plan) and ✅, retrying briefly: until it is
    /// recorded nothing was said, so a failure leaves the message to be answered again.
    async fn complete_turn(&self, msg: &IncomingMessage, turn: &PmTurn) -> Result<(), OutboxError> {
        let thread = msg.thread();
        let effects = match &turn.plan {
            Some(plan) => self.plan_effects(msg, &turn.answer, plan).await,
            None => Effects::new(&thread).reply(&turn.answer, PM_PREFIX),
        }
        .react(&msg.ts, "white_check_mark");
        let changes = [
            Change::Turn {
                thread: &thread,
                role: crate::pm::ROLE,
                messages: &turn.new_messages,
            },
            Change::Processed(msg),
        ];
        let mut attempt = 0;
        loop {
            match self.outbox.commit(&changes, &effects).await {
                Err(e) if attempt < 3 => {
                    tracing::warn!(thread = %thread, "store pm turn: {e}; retrying");
                    attempt += 1;
                    tokio::time::sleep(Duration::from_millis(200 * attempt)).await;
                }
                result => return result.map(|_| ()),
            }
        }
    }
}

#[async_trait]
impl MessageHandler for PmHandler {
    async fn handle(&self, msg: IncomingMessage, cancel: CancellationToken) {
        let thread = msg.thread();
        if let Some(click) = crate::slack::interactive::Click::parse(&msg.text) {
            self.on_click(&msg, click).await;
            return;
        }
        if !self.allowed_users.is_empty() && !self.allowed_users.contains(&msg.user) {
            tracing::info!(
                tag = "PM",
                "thread {thread} → {} is not in access.allowedUsers",
                msg.user
            );
            let reply = "Sorry, I only take requests from the people on this channel's allow-list (`access.allowedUsers`). Ask whoever runs CodeButler to add you.";
            self.answer(&msg, reply).await;
            return;
        }
        if is_undo(&msg.text)
            && self.store.phase(&thread).await.ok().flatten().as_deref() == Some("coder")
        {
            self.undo(&msg).await;
            return;
        }
        if let Some(cap) = crate::thread::budget::parse_budget_command(&msg.text) {
            self.set_budget(&msg, cap).await;
            return;
        }
        if self.coder.supervisor.is_active(&thread.thread_ts) && self.to_running_coder(&msg).await {
            return;
        }
        if is_approval(&msg.text) && self.store.has_pending_plan(&thread).await.unwrap_or(false) {
            self.approve(&msg).await;
            return;
        }
        if let Some(last) = self.coder.ended_run(&msg).await
            && !mentioned_roles(&msg.text).iter().any(|r| r == "pm")
        {
            if is_approval(&msg.text) {
                // "yes"/"ok" after the run is not new work: don't start a run for it.
                let reply = "That plan was carried out already. Tell me what to change next, say **continue** to go on, or **undo** to drop my last run's changes.";
                self.answer_coder(&msg, reply).await;
            } else {
                self.follow_up(&msg, &last).await;
            }
            return;
        }
        if let Route::OtherRoles(named) = route(&msg.text) {
            tracing::info!(
                tag = "PM",
                "thread {thread} → addressed to {}",
                named.join(", ")
            );
            self.answer(&msg, &other_roles_reply(&named)).await;
            return;
        }

        self.react(&msg, "eyes").await;
        tracing::info!(tag = "PM", "thread {thread} → pm responding");
        let turn = match self.pm.answer(&msg, &cancel).await {
            Ok(turn) => turn,
            Err(PmError::Cancelled) => {
                tracing::warn!(thread = %thread, "pm cancelled by shutdown; message kept for the next start");
                return;
            }
            Err(PmError::Model(e)) => {
                tracing::error!(thread = %thread, "pm model call failed: {e}");
                let reply = format!(
                    "I couldn't reach the model ({}). Your message is saved: I'll try it again when you next write in this thread, or when I restart.",
                    short_reason(&e)
                );
                if !self.say(&msg, &[Change::Failed(&msg)], &reply).await {
                    self.settle_failed(&msg).await;
                }
                return;
            }
            Err(PmError::Store(e)) => {
                tracing::error!(thread = %thread, "pm store error: {e}");
                let reply = "Something went wrong on my side reading this thread's history; your message is saved and will be retried.";
                if !self.say(&msg, &[Change::Failed(&msg)], reply).await {
                    self.settle_failed(&msg).await;
                }
                return;
            }
        };
        if turn.plan.is_some() {
            tracing::info!(tag = "PM", "thread {thread} → plan proposed");
        }
        if let Err(e) = self.complete_turn(&msg, &turn).await {
            tracing::error!(thread = %thread, "store pm turn: {e}; nothing was posted, the message will be answered again");
            self.settle_failed(&msg).await;
            return;
        }
        tracing::info!(
            tag = "RSP",
            "pm: {:?} ({} tool calls)",
            preview(&turn.answer),
            turn.tool_calls
        );
    }

    async fn on_panic(&self, msg: IncomingMessage, panic: String) {
        let reply = format!(
            "Something broke while I worked on this ({panic}). It is logged; your message is saved and will be retried when you write again."
        );
        if !self.say(&msg, &[Change::Failed(&msg)], &reply).await {
            self.settle_failed(&msg).await;
        }
    }
}

/// Buttons and budgets (see [`crate::slack::interactive`] and [`crate::thread::budget`]).
impl PmHandler {
    /// The PM's answer with its plan, the plan's cost estimate and budget, and the
    /// Approve/Cancel buttons.
    async fn plan_effects(
        &self,
        msg: &IncomingMessage,
        answer: &str,
        plan: &crate::domain::Plan,
    ) -> Effects {
        use crate::slack::interactive::{plan_blocks, plan_digest};
        let thread = msg.thread();
        let cap = match self.store.thread_budget(&thread).await {
            Ok(cap) => cap.unwrap_or(self.max_cost_per_thread),
            Err(e) => {
                tracing::warn!(thread = %thread, "read the thread's budget: {e}");
                self.max_cost_per_thread
            }
        };
        let estimate = crate::thread::budget::estimate(
            &self.store,
            &self.pm.gateway,
            &self.coder.supervisor.limits().model,
        )
        .await;
        let cost_line = crate::thread::budget::cost_markdown(&estimate, cap);
        let markdown = format!("{answer}\n\n{}", plan.proposal_markdown(&cost_line));
        let digest = plan_digest(&serde_json::to_string(plan).unwrap_or_default());
        Effects::new(&thread)
            .reply_with_blocks(&markdown, PM_PREFIX, |text| plan_blocks(text, &digest))
    }

    /// "budget $N": sets the thread's cap and says so.
    async fn set_budget(&self, msg: &IncomingMessage, cap: f64) {
        let thread = msg.thread();
        tracing::info!(
            tag = "PM",
            "thread {thread} → budget set to {} by {}",
            crate::thread::budget::cap_text(cap),
            msg.user
        );
        let running = self.coder.supervisor.is_active(&thread.thread_ts);
        let change = Change::Budget {
            thread: &thread,
            cap_usd: cap,
            user: &msg.user,
        };
        let reply = crate::thread::budget::budget_set_reply(cap, running);
        if !self
            .say(msg, &[change, Change::Processed(msg)], &reply)
            .await
        {
            self.settle_failed(msg).await;
        }
    }

    /// At approval, fixes the cap the Coder runs under (a typed one, else the default).
    async fn approve_budget(&self, msg: &IncomingMessage) {
        let thread = msg.thread();
        match self
            .store
            .approve_thread_budget(&thread, self.max_cost_per_thread, &msg.user)
            .await
        {
            Ok(cap) => tracing::info!(
                tag = "INF",
                "thread {thread} → budget {}",
                crate::thread::budget::cap_text(cap)
            ),
            // The hub then finds no cap: say so loudly rather than block the approval.
            Err(e) => tracing::error!(thread = %thread, "record the approved budget: {e}"),
        }
    }

    /// A button click: the same rules as the typed words, then the buttons give way to a
    /// line saying who used them.
    async fn on_click(&self, msg: &IncomingMessage, click: crate::slack::interactive::Click) {
        use crate::slack::interactive::{ButtonAction, not_allowed_reply, plan_digest};
        let thread = msg.thread();
        if !self.allowed_users.is_empty() && !self.allowed_users.contains(&msg.user) {
            tracing::info!(
                tag = "PM",
                "thread {thread} → button click by {}, who is not in access.allowedUsers",
                msg.user
            );
            self.answer(msg, &not_allowed_reply(&msg.user)).await;
            return;
        }
        if click.action == ButtonAction::StopRun {
            let reason = format!("stopped in Slack by <@{}>", msg.user);
            if self
                .coder
                .supervisor
                .cancel(&thread.thread_ts, &reason)
                .await
            {
                let note = format!("⏹️ Cancelled by <@{}>", msg.user);
                if self
                    .record(msg, &[Change::Processed(msg)], &resolve(msg, &click, &note))
                    .await
                {
                    return;
                }
            }
            self.done(msg).await;
            return;
        }
        let pending = match self.store.has_pending_plan(&thread).await {
            Ok(true) => self
                .store
                .plan(&thread)
                .await
                .map(|p| p.map(|p| plan_digest(&p))),
            Ok(false) => Ok(None),
            Err(e) => Err(e),
        };
        let pending = match pending {
            Ok(pending) => pending,
            Err(e) => {
                tracing::error!(thread = %thread, "read the pending plan: {e}");
                self.settle_failed(msg).await;
                return;
            }
        };
        match pending {
            // Already approved or withdrawn (a second click): nothing changes.
            None => self.done(msg).await,
            Some(digest) if digest != click.value => {
                self.answer(
                    msg,
                    "That button belongs to an earlier plan; use the buttons on the latest one.",
                )
                .await;
            }
            Some(_) if click.action == ButtonAction::Approve => {
                let note = format!("✅ Approved by <@{}>", msg.user);
                self.record(msg, &[], &resolve(msg, &click, &note)).await;
                self.approve(msg).await;
            }
            Some(_) => {
                tracing::info!(
                    tag = "PM",
                    "thread {thread} → plan withdrawn by {}",
                    msg.user
                );
                let note = format!("✖️ Cancelled by <@{}>", msg.user);
                let effects = resolve(msg, &click, &note).reply(
                    "Plan withdrawn. Tell me what to change, or ask for something else.",
                    PM_PREFIX,
                );
                let changes = [Change::WithdrawPlan(&thread), Change::Processed(msg)];
                if !self.record(msg, &changes, &effects).await {
                    self.settle_failed(msg).await;
                }
            }
        }
    }
}

/// Replaces the clicked message's buttons with `note`.
fn resolve(msg: &IncomingMessage, click: &crate::slack::interactive::Click, note: &str) -> Effects {
    let blocks = crate::slack::interactive::resolved_blocks(&click.message_text, note);
    Effects::new(&msg.thread()).update(
        MessageRef::Ts(click.message_ts.clone()),
        &click.message_text,
        blocks,
    )
}

/// The first line of a text, cut to 80 characters, for log lines.
fn preview(text: &str) -> String {
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
    }
}
