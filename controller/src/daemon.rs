//! The daemon: wires configuration, store, Slack, the model gateway, thread dispatch and the
//! PM together, runs until a shutdown signal, then stops in order — stop taking messages,
//! let work in flight finish within a bound, close the store.

use std::future::Future;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use codebutler_runner::tools::path::RepoRoot;
use slack_morphism::prelude::{SlackInteractionEvent, SlackPushEventCallback};
use tokio_util::sync::CancellationToken;

use crate::approval::{is_approval, is_stop, is_undo};
use crate::coder::SlackCoder;
use crate::config::Config;
use crate::gateway::{Gateway, GatewayError};
use crate::layout::Layout;
use crate::pm::{Pm, PmError};
use crate::routing::{Route, mentioned_roles, other_roles_reply, route};
use crate::runners;
use crate::slack::api::{Sender, auth_test, build_client};
use crate::slack::format::render_reply;
use crate::slack::intake::{Intake, IntakeFilter, classify};
use crate::slack::socket::{EventSink, SocketMode};
use crate::store::{IncomingMessage, Store};
use crate::threads::{Dispatcher, IDLE_TIMEOUT, MessageHandler};

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
    let gateway = Arc::new(Gateway::new(&config.openrouter, store.clone())?);
    let supervisor = runners::supervisor_for(&layout, &config, store.clone(), gateway.clone())
        .await
        .map_err(StartError::Runners)?;
    let admin_stop = CancellationToken::new();
    let admin = tokio::spawn(runners::admin::serve(
        runners::admin::AdminService {
            supervisor: supervisor.clone(),
            layout: layout.clone(),
        },
        admin_stop.clone(),
    ));
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
    let handler = Arc::new(PmHandler {
        pm: pm.clone(),
        coder: SlackCoder {
            supervisor: supervisor.clone(),
            layout: layout.clone(),
            sender: sender.clone(),
            store: store.clone(),
            prepare: runners::preparer_for(&layout, &config).map_err(StartError::Runners)?,
            pm,
        },
        sender,
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
    handler
        .coder
        .report_interrupted(supervisor.take_interrupted())
        .await;
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
struct PmHandler {
    pm: Pm,
    sender: Sender,
    store: Store,
    /// Starts and reports Coder runs of approved plans.
    coder: SlackCoder,
    /// Who may ask for work; empty means everyone in the channel.
    allowed_users: Vec<String>,
    /// `coder.maxCostPerThread`: a thread's budget unless it sets its own.
    max_cost_per_thread: f64,
}

impl PmHandler {
    async fn say(&self, msg: &IncomingMessage, markdown: &str) -> bool {
        self.say_as(msg, markdown, PM_PREFIX).await
    }

    async fn say_as(&self, msg: &IncomingMessage, markdown: &str, prefix: &str) -> bool {
        let parts = render_reply(markdown, prefix);
        match self.sender.send(&msg.channel, &msg.thread_ts, &parts).await {
            Ok(()) => true,
            Err(e) => {
                tracing::error!(thread = %msg.thread(), "post reply: {e}");
                false
            }
        }
    }

    async fn react(&self, msg: &IncomingMessage, name: &str) {
        if let Err(e) = self.sender.react(&msg.channel, &msg.ts, name).await {
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
            crate::questions::answer_from_thread(&self.coder.supervisor, &self.store, msg).await
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

    /// An approval of the thread's pending plan: starts the Coder (at most once).
    async fn approve(&self, msg: &IncomingMessage) {
        let thread = msg.thread();
        let plan = match self.store.approve_plan(&thread).await {
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
        if let Err(e) = self.coder.start(&approval, &plan).await {
            tracing::error!(thread = %thread, "start coder: {e}");
            let _ = self.store.set_phase(&thread, "pm").await;
            let reply = format!(
                "I couldn't start the Coder ({e}). The plan is still waiting; approve it again to retry."
            );
            let _ = self.say(msg, &reply).await;
        }
        self.done(msg).await;
    }

    /// A message after the thread's run ended: a new run goes on from it.
    async fn follow_up(&self, msg: &IncomingMessage, last: &crate::store::RunRecord) {
        tracing::info!(
            tag = "CLD",
            "thread {} → {} follows up on run {}",
            msg.thread(),
            msg.user,
            last.id
        );
        if let Err(e) = self.coder.resume(msg, last).await {
            tracing::error!(thread = %msg.thread(), "resume coder: {e}");
            let reply = format!("I couldn't go on from my last run ({e}).");
            self.say_coder(msg, &reply).await;
        }
        self.done(msg).await;
    }

    async fn say_coder(&self, msg: &IncomingMessage, markdown: &str) -> bool {
        self.say_as(msg, markdown, CODER_PREFIX).await
    }

    async fn done(&self, msg: &IncomingMessage) {
        if let Err(e) = self.store.mark_processed(msg).await {
            tracing::error!(thread = %msg.thread(), "mark processed: {e}");
        }
    }

    /// Stores a turn, retrying briefly: the answer is already posted.
    async fn store_turn(
        &self,
        msg: &IncomingMessage,
        messages: &[codebutler_runner::conversation::ChatMessage],
    ) -> Result<(), crate::store::StoreError> {
        let mut attempt = 0;
        loop {
            match self
                .store
                .complete_turn(msg, crate::pm::ROLE, messages)
                .await
            {
                Err(e) if attempt < 3 => {
                    tracing::warn!(thread = %msg.thread(), "store pm turn: {e}; retrying");
                    attempt += 1;
                    tokio::time::sleep(Duration::from_millis(200 * attempt)).await;
                }
                result => return result,
            }
        }
    }

    async fn settle_failed(&self, msg: &IncomingMessage) {
        if let Err(e) = self.store.mark_failed(msg).await {
            tracing::error!(thread = %msg.thread(), "mark message {} failed: {e}", msg.ts);
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
            if self.say(&msg, reply).await {
                if let Err(e) = self.store.mark_processed(&msg).await {
                    tracing::error!(thread = %thread, "mark processed: {e}");
                }
            } else {
                self.settle_failed(&msg).await;
            }
            return;
        }
        if is_undo(&msg.text)
            && self.store.phase(&thread).await.ok().flatten().as_deref() == Some("coder")
        {
            let reply = self.coder.undo(&msg).await;
            self.say_coder(&msg, &reply).await;
            self.done(&msg).await;
            return;
        }
        if let Some(cap) = crate::budget::parse_budget_command(&msg.text) {
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
                self.say_coder(&msg, reply).await;
                self.done(&msg).await;
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
            if self.say(&msg, &other_roles_reply(&named)).await {
                if let Err(e) = self.store.mark_processed(&msg).await {
                    tracing::error!(thread = %thread, "mark processed: {e}");
                }
            } else {
                self.settle_failed(&msg).await;
            }
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
                self.say(
                    &msg,
                    &format!(
                        "I couldn't reach the model ({}). Your message is saved: I'll try it again when you next write in this thread, or when I restart.",
                        short_reason(&e)
                    ),
                )
                .await;
                self.settle_failed(&msg).await;
                return;
            }
            Err(PmError::Store(e)) => {
                tracing::error!(thread = %thread, "pm store error: {e}");
                self.say(&msg, "Something went wrong on my side reading this thread's history; your message is saved and will be retried.").await;
                self.settle_failed(&msg).await;
                return;
            }
        };

        let posted = match &turn.plan {
            Some(plan) => {
                tracing::info!(tag = "PM", "thread {thread} → plan proposed");
                self.propose(&msg, &turn.answer, plan).await
            }
            None => self.say(&msg, &turn.answer).await,
        };
        if !posted {
            self.settle_failed(&msg).await;
            return;
        }
        if let Err(e) = self.store_turn(&msg, &turn.new_messages).await {
            // The answer is posted: never answer again. The thread's history misses this turn.
            tracing::error!(thread = %thread, "store pm turn: {e}; the answer was posted but is not in the thread's history");
            if let Err(e) = self.store.mark_processed(&msg).await {
                tracing::error!(thread = %thread, "mark processed: {e}");
            }
            return;
        }
        self.react(&msg, "white_check_mark").await;
        tracing::info!(
            tag = "RSP",
            "pm: {:?} ({} tool calls)",
            preview(&turn.answer),
            turn.tool_calls
        );
    }

    async fn on_panic(&self, msg: IncomingMessage, panic: String) {
        self.say(
            &msg,
            &format!("Something broke while I worked on this ({panic}). It is logged; your message is saved and will be retried when you write again."),
        )
        .await;
        self.settle_failed(&msg).await;
    }
}

/// Buttons and budgets (see [`crate::slack::interactive`] and [`crate::budget`]).
impl PmHandler {
    /// Posts the PM's answer with its plan, the plan's cost estimate and budget, and the
    /// Approve/Cancel buttons.
    async fn propose(
        &self,
        msg: &IncomingMessage,
        answer: &str,
        plan: &crate::pm::tools::Plan,
    ) -> bool {
        use crate::slack::interactive::{plan_blocks, plan_digest};
        let thread = msg.thread();
        let cap = match self.store.thread_budget(&thread).await {
            Ok(cap) => cap.unwrap_or(self.max_cost_per_thread),
            Err(e) => {
                tracing::warn!(thread = %thread, "read the thread's budget: {e}");
                self.max_cost_per_thread
            }
        };
        let estimate = crate::budget::estimate(
            &self.store,
            &self.pm.gateway,
            &self.coder.supervisor.limits().model,
        )
        .await;
        let cost_line = crate::budget::cost_markdown(&estimate, cap);
        let markdown = format!("{answer}\n\n{}", plan.proposal_markdown(&cost_line));
        let digest = plan_digest(&serde_json::to_string(plan).unwrap_or_default());
        let parts = render_reply(&markdown, PM_PREFIX);
        match self
            .sender
            .send_with_blocks(&msg.channel, &msg.thread_ts, &parts, |text| {
                plan_blocks(text, &digest)
            })
            .await
        {
            Ok(_) => true,
            Err(e) => {
                tracing::error!(thread = %thread, "post plan: {e}");
                false
            }
        }
    }

    /// "budget $N": sets the thread's cap and says so.
    async fn set_budget(&self, msg: &IncomingMessage, cap: f64) {
        let thread = msg.thread();
        if let Err(e) = self.store.set_thread_budget(&thread, cap, &msg.user).await {
            tracing::error!(thread = %thread, "set budget: {e}");
            self.settle_failed(msg).await;
            return;
        }
        tracing::info!(
            tag = "PM",
            "thread {thread} → budget set to {} by {}",
            crate::budget::cap_text(cap),
            msg.user
        );
        let running = self.coder.supervisor.is_active(&thread.thread_ts);
        self.say(msg, &crate::budget::budget_set_reply(cap, running))
            .await;
        self.done(msg).await;
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
                crate::budget::cap_text(cap)
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
            self.say(msg, &not_allowed_reply(&msg.user)).await;
            self.done(msg).await;
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
                self.resolve(msg, &click, &format!("⏹️ Cancelled by <@{}>", msg.user))
                    .await;
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
                self.say(
                    msg,
                    "That button belongs to an earlier plan; use the buttons on the latest one.",
                )
                .await;
                self.done(msg).await;
            }
            Some(_) if click.action == ButtonAction::Approve => {
                self.resolve(msg, &click, &format!("✅ Approved by <@{}>", msg.user))
                    .await;
                self.approve(msg).await;
            }
            Some(_) => {
                if let Err(e) = self.store.withdraw_plan(&thread).await {
                    tracing::error!(thread = %thread, "withdraw plan: {e}");
                    self.settle_failed(msg).await;
                    return;
                }
                tracing::info!(
                    tag = "PM",
                    "thread {thread} → plan withdrawn by {}",
                    msg.user
                );
                self.resolve(msg, &click, &format!("✖️ Cancelled by <@{}>", msg.user))
                    .await;
                self.say(
                    msg,
                    "Plan withdrawn. Tell me what to change, or ask for something else.",
                )
                .await;
                self.done(msg).await;
            }
        }
    }

    /// Replaces the clicked message's buttons with `note`.
    async fn resolve(
        &self,
        msg: &IncomingMessage,
        click: &crate::slack::interactive::Click,
        note: &str,
    ) {
        let blocks = crate::slack::interactive::resolved_blocks(&click.message_text, note);
        if let Err(e) = self
            .sender
            .update_blocks(&msg.channel, &click.message_ts, &click.message_text, blocks)
            .await
        {
            tracing::warn!(thread = %msg.thread(), "replace the buttons: {e}");
        }
    }
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
