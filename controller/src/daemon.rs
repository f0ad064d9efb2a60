//! The daemon: wires configuration, store, Slack, the model gateway, the runners and the
//! thread handler ([`crate::thread`]) together, runs until a shutdown signal, then stops in
//! order — stop taking messages, let work in flight finish within a bound, close the store.
//! It holds no policy: what a message does is [`crate::thread::handler`]'s.
//!
//! It holds the repository's lock ([`crate::repo_lock`]) while it runs, so it is the only
//! daemon there. At start, before anything can start a run, it sorts out what the last stop
//! cut off ([`crate::reconcile`]) and removes what closed or unknown threads left
//! ([`crate::workspace::orphans`]); once connected it delivers what the outbox still holds and
//! answers the messages still pending (a close a stop cut off among them), then starts the
//! PR watcher ([`crate::closing::watcher`]). Everything it says in Slack goes through the outbox
//! ([`crate::slack::outbox`]), recorded with the change it reports.

use std::future::Future;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use codebutler_agent::tools::path::RepoRoot;
use tokio_util::sync::CancellationToken;

use crate::closing::watcher::PrWatcher;
use crate::coder::SlackCoder;
use crate::config::Config;
use crate::gateway::{Gateway, GatewayError};
use crate::journal::description::Describer;
use crate::layout::Layout;
use crate::memory::Memory;
use crate::memory::source::DefaultBranchMemory;
use crate::pm::Pm;
use crate::postflight::AfterPr;
use crate::runners;
use crate::slack::api::{Sender, auth_test, build_client};
use crate::slack::intake::IntakeFilter;
use crate::slack::outbox::Outbox;
use crate::slack::socket::SocketMode;
use crate::store::{Store, repository_name};
use crate::thread::dispatch::{Dispatcher, IDLE_TIMEOUT};
use crate::thread::handler::ThreadHandler;
use crate::thread::intake::IntakeSink;

/// How long shutdown waits for work in flight.
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(30);

/// A failure that stops the daemon from starting.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error(transparent)]
    Store(#[from] crate::store::StoreError),
    #[error(transparent)]
    Slack(#[from] crate::slack::api::SlackError),
    #[error("connect to Slack Socket Mode: {0}")]
    Socket(#[source] slack_morphism::errors::SlackClientError),
    #[error("set up the model gateway: {0}")]
    Gateway(#[from] GatewayError),
    #[error("set up runners: {0}")]
    Runners(#[from] runners::SetupError),
    #[error(transparent)]
    Lock(#[from] crate::repo_lock::LockError),
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
    let _lock = crate::repo_lock::RepoLock::take(&layout.dir)?;
    let store = Store::connect(&config.store, &repository_name(&layout), &layout).await?;
    let client = build_client(&config.slack.api_url)?;
    let bot = auth_test(&client, &config.slack.bot_token).await?;
    tracing::info!("slack bot user {} in team {}", bot.user_id, bot.team_id);
    let sender = Sender::new(
        client.clone(),
        &config.slack.bot_token,
        config.slack.messages_per_second,
    );
    let outbox = Outbox::new(store.clone(), sender);
    let handler = Arc::new(thread_handler(&layout, &config, &store, &outbox).await?);
    let supervisor = handler.coder.supervisor.clone();
    // Before anything can start a run: what the last stop cut off.
    crate::reconcile::after_stop(&handler.coder).await;
    log_cleanup(&crate::workspace::orphans::clean_up(&layout, &store).await);
    // The steps after a pull request opened that the last stop cut off.
    let after_pr = handler.coder.after_pr.clone();
    tokio::spawn(async move { after_pr.resume_all().await });
    let admin_stop = CancellationToken::new();
    let admin = tokio::spawn(crate::admin::server::serve(
        crate::admin::server::AdminService {
            supervisor: supervisor.clone(),
            layout: layout.clone(),
        },
        admin_stop.clone(),
    ));
    let dispatcher = Dispatcher::new(store.clone(), handler, IDLE_TIMEOUT);
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
        .map_err(StartError::Socket)?;
    // Effects the last stop left undelivered, in the background: a thread whose outcome is
    // unknown is read first, and Slack rate-limits that.
    tokio::spawn(async move {
        let threads = outbox.recover().await;
        if threads > 0 {
            tracing::info!("delivered what the outbox held for {threads} thread(s)");
        }
    });
    // Closes a stop cut off are finished here too: their message is still pending.
    let resumed = dispatcher.resume_pending().await?;
    if resumed > 0 {
        tracing::info!("resuming {resumed} thread(s) with unanswered messages");
    }
    let watcher_stop = CancellationToken::new();
    let watcher = tokio::spawn(
        PrWatcher {
            store: store.clone(),
            dispatcher: dispatcher.clone(),
            supervisor: supervisor.clone(),
            gh: PathBuf::from(&config.github.cli),
            repo: layout.repo.clone(),
            interval: config.github.pr_watch_interval,
        }
        .run(watcher_stop.clone()),
    );
    tracing::info!(
        "listening in channel {} (pm model {})",
        config.slack.channel_id,
        config.product_manager.default_model()
    );

    shutdown.await;
    tracing::info!("shutting down: no new messages; finishing work in flight");
    socket.shutdown().await;
    watcher_stop.cancel();
    if let Err(e) = watcher.await {
        tracing::warn!("pr watcher task: {e}");
    }
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

/// Logs what the orphan cleanup did, one line each.
fn log_cleanup(cleanup: &crate::workspace::orphans::Cleanup) {
    for removal in &cleanup.removed {
        tracing::info!("{removal}");
    }
    for line in &cleanup.left {
        tracing::warn!("{line}");
    }
    for failure in &cleanup.failures {
        tracing::error!("orphan cleanup: {failure}");
    }
}

/// The thread handler with its PM and Coder: the model gateway, the runners' supervisor and
/// the repository the PM reads.
async fn thread_handler(
    layout: &Layout,
    config: &Config,
    store: &Store,
    outbox: &Outbox,
) -> Result<ThreadHandler, StartError> {
    let gateway = Arc::new(Gateway::new(&config.openrouter, store.clone())?);
    let supervisor =
        runners::supervisor_for(layout, config, store.clone(), gateway.clone()).await?;
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
        memory: DefaultBranchMemory::new(&layout.repo),
    };
    let memory = Memory {
        store: store.clone(),
        outbox: outbox.clone(),
        gateway: pm.gateway.clone(),
        model: memory_extraction_model(config),
        layout: layout.clone(),
        source: pm.memory.clone(),
        prepare: supervisor.worktrees().clone(),
        gh: PathBuf::from(&config.github.cli),
    };
    let describer = Describer {
        pm: pm.clone(),
        outbox: outbox.clone(),
        prepare: supervisor.worktrees().clone(),
    };
    let coder = SlackCoder {
        prepare: supervisor.worktrees().clone(),
        supervisor,
        layout: layout.clone(),
        outbox: outbox.clone(),
        store: store.clone(),
        pm: pm.clone(),
        after_pr: AfterPr {
            store: store.clone(),
            outbox: outbox.clone(),
            describer,
            memory: memory.clone(),
        },
    };
    Ok(ThreadHandler {
        pm,
        coder,
        outbox: outbox.clone(),
        store: store.clone(),
        allowed_users: config.access.allowed_users.clone(),
        max_cost_per_thread: config.coder.max_cost_per_thread,
        merge_strategy: config.github.merge_strategy,
        memory,
    })
}

/// The OpenRouter model id of `productManager.memoryExtraction` (the default PM model when it
/// is not set; the loader checked it is in the pool).
fn memory_extraction_model(config: &Config) -> String {
    let pm = &config.product_manager;
    pm.models
        .get(&pm.memory_extraction)
        .map_or_else(|| pm.default_model().to_owned(), |m| m.model.clone())
}
