//! The service: one process, one Slack app, any number of repositories. Slack delivers an
//! app's events over its Socket Mode connections, each event to one of them, so one app must
//! have one consumer that routes by channel — two processes on one app token would each
//! acknowledge and drop about half of the other's events.
//!
//! This module owns what the repositories share: the Slack client, the bot's identity (one
//! `auth.test`), one rate-limited [`Sender`] (Slack's limits are per app), one Socket Mode
//! connection whose events a [`router::Router`] hands to the repository serving their
//! channel, the app's lock on this host ([`app_lock`]) and the watch for another process on
//! the app elsewhere ([`connections`]). Each repository's own part — lock, store, handler,
//! dispatcher, PR watcher, admin socket — is [`daemon`].
//!
//! Start: every repository's lock, then the app's lock (a second daemon for a repository is
//! told about that repository first), then the set-up checks ([`preflight`]: Slack's tokens,
//! each repository's channel, model key and model ids, `gh` and sandbox, each mistake one
//! line with its fix), then each repository, then Socket Mode; once connected each
//! repository resumes what it left. One repository that cannot start fails the whole start, naming it, after
//! stopping those already started: serving the others would acknowledge and drop its
//! channel's events, which is the loss this service exists to prevent. A channel the bot is
//! not in (or cannot see) is different: Slack sends none of its events, so among several
//! repositories it is said once and the others are served. Stop: Socket Mode first (no new
//! events), then every repository in order.
//!
//! A person opening the app's Home tab gets it published from every repository's store
//! ([`home`]), and again whenever one of their threads changes ([`home_refresh`]).
//!
//! With a `dashboard` section in the global config the service also serves the dashboard
//! ([`crate::dashboard`]): its address is taken before any repository starts (a port in use
//! fails the start, saying so), and it serves once they all have, until the stop.
//!
//! Under systemd ([`notify`]) the start says what it is doing in `STATUS=` lines and
//! `READY=1` only once every repository has started and Slack's `hello` came on the Socket
//! Mode connection, pings the watchdog while it runs, and says `STOPPING=1` when it stops.

pub mod app_lock;
pub mod connections;
pub mod conversations;
pub mod daemon;
pub mod home;
pub mod home_refresh;
pub mod install;
pub mod notify;
pub mod parts;
pub mod preflight;
pub mod router;
pub mod status;

use std::future::Future;
use std::path::PathBuf;
use std::sync::Arc;

use async_trait::async_trait;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::config::Config;
use crate::layout::Layout;
use crate::logging::LogRing;
use crate::secret::Secret;
use crate::slack::api::{Client, Sender, build_client};
use crate::slack::assistant::Surface;
use crate::slack::socket::{EventSink, ProbeError, SocketMode};
use crate::store::Instance;
use crate::workspace::build_slots::BuildSlots;
use daemon::{LockedRepo, RepoService};

pub use connections::{LiveInstances, NoPeers, PeerConnections, SharedApp};
pub use notify::Notifier;
pub use parts::{ServedRepo, SharedSlack, StartError};

/// How long a probe connection waits for its `hello`.
const PROBE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(15);

/// Serves the one repository at `layout` (already set up with [`Layout::init`]) until
/// `shutdown` completes: `codebutler --repo DIR`. `home` is the global config directory (where
/// the Slack app's lock lives); `notifier` tells systemd how the start goes; `logs` is the
/// ring of recent log lines the dashboard shows.
pub async fn run_one(
    layout: Layout,
    config: Config,
    home: PathBuf,
    notifier: Arc<Notifier>,
    logs: LogRing,
    shutdown: impl Future<Output = ()>,
) -> Result<(), StartError> {
    let repo = ServedRepo {
        name: None,
        layout,
        config,
    };
    run(vec![repo], home, NoPeers, notifier, logs, shutdown).await
}

/// Serves `repos` (the Slack app is the first one's; the configuration checked they all
/// name the same) until `shutdown` completes, or until another process turns out to share
/// the app. `home` is the global config directory (the app's lock is under it); `peers`
/// counts the Socket Mode connections other instances legitimately hold; `notifier` tells
/// systemd how the start goes, when it is ready and that it is alive; `logs` is the ring of
/// recent log lines the dashboard shows.
pub async fn run(
    repos: Vec<ServedRepo>,
    home: PathBuf,
    peers: impl PeerConnections + 'static,
    notifier: Arc<Notifier>,
    logs: LogRing,
    shutdown: impl Future<Output = ()>,
) -> Result<(), StartError> {
    let Some(first) = repos.first() else {
        return Err(StartError::NoRepositories);
    };
    // The watchdog is pinged from the start, and no longer once this returns.
    let alive = CancellationToken::new();
    tokio::spawn(notifier.clone().keep_alive(alive.clone()));
    let _alive = alive.drop_guard();
    tokio::pin!(shutdown);
    let names = served_names(&repos);
    let app = first.config.slack.clone();
    // One limit on preparations for the machine: every repository's is the same (checked
    // with the configuration).
    let builds = BuildSlots::new(first.config.build.max_concurrent_builds);
    let dashboard_config = first.config.dashboard.clone();
    let mut locked = Vec::with_capacity(repos.len());
    for repo in repos {
        let name = repo.name.clone();
        locked.push(RepoService::lock(repo).map_err(|e| named(name.as_deref(), e))?);
    }
    let _app_lock = app_lock::AppLock::take(&home, &app.app_token)?;
    let dashboard_listener = match &dashboard_config {
        Some(config) => Some(tokio::net::TcpListener::bind(config.listen).await.map_err(
            |source| StartError::Dashboard {
                listen: config.listen,
                source,
            },
        )?),
        None => None,
    };
    notifier
        .status("checking the set-up: Slack, each repository's channel, model key, gh, sandbox");
    let client = build_client(&app.api_url)?;
    let bot = preflight::slack(&client, &app).await?;
    tracing::info!("slack bot user {} in team {}", bot.user_id, bot.team_id);
    for silent in preflight::trigger_scopes(&app).await {
        tracing::warn!("{silent}");
    }
    let locked = check_repositories(locked, &client, &app, &bot).await?;
    let slack = SharedSlack {
        client: client.clone(),
        sender: Sender::new(client.clone(), &app.bot_token, app.messages_per_second)
            .with_surface(if app.ai_surface {
                Surface::on(&bot.team_id).streaming(app.streaming)
            } else {
                Surface::off()
            })
            .with_bot_user(&bot.user_id),
        bot_user_id: bot.user_id,
    };
    let instance = Instance::this_process().map_err(StartError::Instance)?;
    notifier.status(&format!("starting {names}"));
    let mut started = start_all(locked, &slack, &instance, &builds).await?;
    let dashboard_stop = CancellationToken::new();
    let _dashboard_stop = dashboard_stop.clone().drop_guard();
    if let (Some(listener), Some(config)) = (dashboard_listener, dashboard_config) {
        let dashboard = crate::dashboard::Dashboard {
            repos: started.iter().map(RepoService::dashboard_view).collect(),
            logs,
            token: config.token,
        };
        tracing::info!("dashboard on http://{}", config.listen);
        let stop = dashboard_stop.clone();
        tokio::spawn(async move {
            if let Err(e) = crate::dashboard::serve(listener, dashboard, stop).await {
                tracing::error!("dashboard: {e}");
            }
        });
    }
    // On a shared store the other live instances' connections are expected.
    let peers: Arc<dyn PeerConnections> = match started.iter().find_map(RepoService::shared_store) {
        Some(store) => Arc::new(LiveInstances {
            store,
            me: instance.id.clone(),
        }),
        None => Arc::new(peers),
    };
    let home = Arc::new(home::AppHome {
        repos: started.iter().map(RepoService::home_repo).collect(),
        sender: slack.sender.clone(),
    });
    let home_stop = CancellationToken::new();
    tokio::spawn(
        home.clone()
            .keep_fresh(home_refresh::REFRESH_EVERY, home_stop.clone()),
    );
    // Stopped on every way out of the start too.
    let _home_refresh = home_stop.clone().drop_guard();
    let router = router::Router::new(
        started
            .iter()
            .map(|r| (r.channel.clone(), r.sink.clone() as Arc<dyn EventSink>)),
    )
    .with_home(home);
    let router = match started.as_slice() {
        [first, _, ..] => router.with_conversations(Arc::new(conversations::Conversations {
            repos: started.iter().map(RepoService::conversation_repo).collect(),
            store: first.store().clone(),
            outbox: first.outbox().clone(),
            ownership: first.ownership(),
            bot_user_id: slack.bot_user_id.clone(),
        })),
        _ => router,
    };
    let (hellos, mut hello_rx) = mpsc::unbounded_channel();
    notifier.status("connecting to Slack (Socket Mode)");
    let socket = match SocketMode::start(
        client.clone(),
        &app.app_token,
        Arc::new(router),
        hellos.clone(),
    )
    .await
    {
        Ok(socket) => socket,
        Err(e) => {
            stop_all(started).await;
            return Err(StartError::Socket(e));
        }
    };
    for repo in &mut started {
        if let Err(e) = repo.connected().await {
            let e = named(repo.name.as_deref(), e);
            socket.shutdown().await;
            stop_all(started).await;
            return Err(e);
        }
    }
    // Ready once Slack said hello on the connection: events flow from then on.
    notifier.status("waiting for Slack's hello on the Socket Mode connection");
    let first_hello = tokio::select! {
        () = &mut shutdown => None,
        hello = hello_rx.recv() => hello,
    };
    let watch_stop = CancellationToken::new();
    let outcome = match first_hello {
        None => Ok(()),
        Some(connections) => {
            // The watch judges the first hello's count like every later one.
            let _ = hellos.send(connections);
            drop(hellos);
            notifier.ready(&format!("serving {names}"));
            let watch = connections::watch(
                hello_rx,
                peers,
                Arc::new(SocketProbe {
                    client,
                    app_token: app.app_token.clone(),
                }),
                app.connection_grace,
                watch_stop.clone(),
            );
            tokio::pin!(watch);
            tokio::select! {
                () = &mut shutdown => Ok(()),
                Some(shared) = &mut watch => Err(StartError::SharedApp(shared)),
            }
        }
    };
    match &outcome {
        Ok(()) => tracing::info!("shutting down: no new messages; finishing work in flight"),
        Err(e) => tracing::error!("{e}"),
    }
    notifier.stopping("stopping: no new messages; finishing the work in flight");
    socket.shutdown().await;
    watch_stop.cancel();
    home_stop.cancel();
    stop_all(started).await;
    tracing::info!("stopped");
    outcome
}

/// The repositories served, as a status line names them.
fn served_names(repos: &[ServedRepo]) -> String {
    let names: Vec<String> = repos
        .iter()
        .map(|r| match &r.name {
            Some(name) => name.clone(),
            None => r.layout.repo.display().to_string(),
        })
        .collect();
    match names.as_slice() {
        [one] => format!("repository {one}"),
        many => format!("{} repositories: {}", many.len(), many.join(", ")),
    }
}

/// The set-up of each repository ([`preflight`]): its channel, its model key and model
/// ids (the model list read for them is kept for the repository's gateway), `gh`, the
/// sandbox. A mistake in a repository's own settings stops the start, naming it. A channel
/// the bot cannot serve stops it too when the process serves that repository alone; among
/// several, it is said once in the log and the others are served (the channel's events only
/// come once the bot is in it, and then the repository serves them) — unless no channel is
/// left to serve.
async fn check_repositories(
    mut locked: Vec<LockedRepo>,
    client: &Client,
    app: &crate::config::SlackConfig,
    bot: &crate::slack::api::BotIdentity,
) -> Result<Vec<LockedRepo>, StartError> {
    let mut unserved = Vec::new();
    for repo in &mut locked {
        let name = repo.name().map(str::to_owned);
        match preflight::channel(client, app, bot, repo.channel()).await {
            Ok(()) => {}
            Err(preflight::CheckError::Mistake(mistake)) => {
                unserved.push(named(name.as_deref(), mistake.into()));
            }
            Err(e) => return Err(named(name.as_deref(), e.into())),
        }
        let models = preflight::repository(repo.layout(), repo.config())
            .await
            .map_err(|e| named(name.as_deref(), e.into()))?;
        repo.knowing_models(models);
    }
    if unserved.len() == locked.len() {
        if let Some(first) = unserved.into_iter().next() {
            return Err(first);
        }
        return Ok(locked);
    }
    for channel in unserved {
        tracing::error!("{channel}");
    }
    Ok(locked)
}

/// Starts every locked repository in order; when one fails, stops those already started
/// and returns its error, naming it.
async fn start_all(
    locked: Vec<LockedRepo>,
    slack: &SharedSlack,
    instance: &Instance,
    builds: &BuildSlots,
) -> Result<Vec<RepoService>, StartError> {
    let mut started = Vec::with_capacity(locked.len());
    let mut locked = locked.into_iter();
    while let Some(repo) = locked.next() {
        let name = repo.name().map(str::to_owned);
        match repo.start(slack, instance, builds).await {
            Ok(service) => started.push(service),
            Err(e) => {
                // Let go of the locks not started yet before the slow stops.
                drop(locked);
                stop_all(started).await;
                return Err(named(name.as_deref(), e));
            }
        }
    }
    Ok(started)
}

/// Stops the repositories in order.
async fn stop_all(repos: Vec<RepoService>) {
    for repo in repos {
        repo.shutdown().await;
    }
}

/// `e`, naming the repository when the process serves repositories by name.
fn named(name: Option<&str>, e: StartError) -> StartError {
    match name {
        Some(name) => StartError::Repository {
            name: name.to_owned(),
            source: Box::new(e),
        },
        None => e,
    }
}

/// Counts the app's connections through a short-lived connection of its own. It takes no
/// events: one Slack hands it in that moment is left unacknowledged, and Slack delivers it
/// again on the service's connection.
struct SocketProbe {
    client: Arc<Client>,
    app_token: Secret,
}

#[async_trait]
impl connections::Probe for SocketProbe {
    async fn connections(&self) -> Result<u32, ProbeError> {
        SocketMode::count_connections(self.client.clone(), &self.app_token, PROBE_TIMEOUT).await
    }
}
