//! One repository's part of the service: its lock, store, thread handler, dispatcher, PR
//! watcher and admin socket. The Slack app — the client, the bot's identity, the rate-limited
//! sender and the Socket Mode connection — is shared by every repository a process serves
//! and lives in the rest of [`crate::service`], which hands each repository the events of its
//! channel (the two need each other's types, so the daemon is the service's own module).
//! It holds no policy: what a message does is [`crate::thread::handler`]'s.
//!
//! A repository starts in three steps, so that the service can take every lock before it
//! changes anything and connect to Slack only once every repository is ready:
//! [`RepoService::lock`] takes the repository's lock ([`crate::repo_lock`]), so it is the only
//! daemon there; [`LockedRepo::start`] opens the store and, before anything can start a run,
//! sorts out what the last stop cut off ([`crate::reconcile`]) and removes what closed or
//! unknown threads left ([`crate::workspace::orphans`]), then opens the admin socket; once
//! connected, [`RepoService::connected`] delivers what the outbox still holds, answers the
//! messages still pending (a close a stop cut off among them) and starts the PR watcher
//! ([`crate::closing::watcher`]) and, with `reports.weekly`, the weekly cost report
//! ([`crate::journal::weekly`]). [`RepoService::shutdown`] stops it in order: the watcher,
//! work in flight within a bound, the runners and the reports of their ends, the admin
//! socket, the store. Everything it says in Slack goes through the outbox
//! ([`crate::slack::outbox`]), recorded with the change it reports.
//!
//! On a PostgreSQL store other instances (hosts) may share the repository. Then this
//! instance registers itself and beats, handles a thread only while it holds the thread's
//! lease ([`crate::thread::lease`]), fences its commits by that lease, and watches for threads
//! waiting without an owner. What a stop left is not sorted out for the whole store at start
//! (another instance may be working on it) but thread by thread, by whichever instance takes
//! the thread ([`crate::dispatch::MessageHandler::adopt`]).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use codebutler_agent::tools::path::RepoRoot;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::parts::{ServedRepo, SharedSlack, StartError};
use crate::closing::watcher::PrWatcher;
use crate::coder::SlackCoder;
use crate::coder::ahead::Ahead;
use crate::config::Config;
use crate::coordination::Coordination;
use crate::coordination::merge_order::MergeOrder;
use crate::dispatch::{Dispatcher, IDLE_TIMEOUT};
use crate::gateway::Gateway;
use crate::gateway::model_list::ModelList;
use crate::gateway::transcribe::Transcriber;
use crate::journal::description::Describer;
use crate::journal::weekly::WeeklyReport;
use crate::layout::Layout;
use crate::memory::Memory;
use crate::memory::source::DefaultBranchMemory;
use crate::pm::Pm;
use crate::pm::attachments::Attachments;
use crate::postflight::AfterPr;
use crate::repo_lock::RepoLock;
use crate::runners;
use crate::runners::supervisor::Supervisor;
use crate::slack::files::FileFetcher;
use crate::slack::intake::IntakeFilter;
use crate::slack::outbox::Outbox;
use crate::store::{Instance, Store, repository_name};
use crate::thread::handler::ThreadHandler;
use crate::thread::intake::{IntakeSink, ReactionTrigger};
use crate::thread::lease::{LEASE_TTL, Leases, WATCH_EVERY};
use crate::thread::pm_choice::PmChoice;
use crate::thread::slash_command::SlashCommands;
use crate::workspace::build_slots::BuildSlots;
use crate::workspace::write_access::WriteAccess;

/// How long shutdown waits for work in flight.
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(30);

/// A repository whose lock this process holds, not started yet.
#[derive(Debug)]
pub struct LockedRepo {
    repo: ServedRepo,
    lock: RepoLock,
    /// The provider's model list the start's checks read, for the gateway's prices.
    models: Option<Arc<ModelList>>,
}

/// A started repository: what its shutdown stops.
#[derive(Debug)]
pub struct RepoService {
    /// The repository's name (`None` when the process serves one repository with `--repo`).
    pub name: Option<String>,
    /// The channel it serves.
    pub channel: String,
    /// What stores its channel's events before they are acknowledged.
    pub sink: Arc<IntakeSink>,
    layout: Layout,
    config: Config,
    store: Store,
    outbox: Outbox,
    dispatcher: Dispatcher,
    supervisor: Supervisor,
    /// The preparations of plans still discussed, discarded at shutdown.
    ahead: Ahead,
    /// The runs' followers, which report the runs the stop ends.
    followers: TaskTracker,
    admin_stop: CancellationToken,
    admin: JoinHandle<std::io::Result<()>>,
    watcher_stop: CancellationToken,
    watcher: Option<JoinHandle<()>>,
    /// Who may steer the Coder from GitHub: the PM's GHStatus and the PR watcher share it.
    write_access: WriteAccess,
    /// Coordination between threads: its merge-order refresh runs beside the watcher.
    coordination: Coordination,
    merge_order: Option<JoinHandle<()>>,
    /// The weekly cost report's task (`reports.weekly`), beside the watcher.
    weekly: Option<JoinHandle<()>>,
    /// With several instances on one store: this instance, and what stops its heartbeat
    /// and its watch for waiting threads.
    shared: Option<SharedStore>,
    _lock: RepoLock,
}

/// This instance's part in a store several instances share (PostgreSQL).
#[derive(Debug)]
struct SharedStore {
    instance: Instance,
    stop: CancellationToken,
    tasks: Vec<JoinHandle<()>>,
}

impl RepoService {
    /// Takes the repository's lock: [`crate::repo_lock::LockError::Held`] when a daemon
    /// already serves it.
    pub fn lock(repo: ServedRepo) -> Result<LockedRepo, StartError> {
        let lock = RepoLock::take(&repo.layout.dir)?;
        Ok(LockedRepo {
            repo,
            lock,
            models: None,
        })
    }

    /// After Socket Mode connected: delivers what the outbox still holds (in the
    /// background: a thread whose outcome is unknown is read first, and Slack rate-limits
    /// that), answers the messages still pending and starts the PR watcher.
    pub async fn connected(&mut self) -> Result<(), StartError> {
        // On a shared store, what another instance left undelivered is delivered by the
        // instance that takes its thread (`MessageHandler::adopt`), never by all at once.
        if self.shared.is_none() {
            let outbox = self.outbox.clone();
            tokio::spawn(async move {
                let threads = outbox.recover().await;
                if threads > 0 {
                    tracing::info!("delivered what the outbox held for {threads} thread(s)");
                }
            });
        }
        // Closes a stop cut off are finished here too: their message is still pending.
        let resumed = self.dispatcher.resume_pending().await?;
        if resumed > 0 {
            tracing::info!("resuming {resumed} thread(s) with unanswered messages");
        }
        self.watcher = Some(tokio::spawn(
            PrWatcher {
                store: self.store.clone(),
                dispatcher: self.dispatcher.clone(),
                supervisor: self.supervisor.clone(),
                gh: PathBuf::from(&self.config.github.cli),
                repo: self.layout.repo.clone(),
                interval: self.config.github.pr_watch_interval,
                shared_as: self.shared.as_ref().map(|s| s.instance.id.clone()),
                reviews: crate::closing::watcher::ReviewSettings {
                    ignore_bots: self.config.github.ignore_bots.clone(),
                    max_rounds: self.config.github.max_review_rounds,
                    quiet: self.config.github.review_quiet,
                    max_sorts_per_hour: self.config.github.max_sorts_per_hour,
                },
                access: self.write_access.clone(),
                reviewer_on: self.config.reviewer.is_some(),
            }
            .run(self.watcher_stop.clone()),
        ));
        self.merge_order = Some(tokio::spawn(
            MergeOrder {
                store: self.store.clone(),
                outbox: self.outbox.clone(),
                channel: self.channel.clone(),
                shared_as: self.shared.as_ref().map(|s| s.instance.id.clone()),
                wake: self.coordination.merge_order.clone(),
            }
            .run(
                self.config.github.pr_watch_interval,
                self.watcher_stop.clone(),
            ),
        ));
        if self.config.reports.weekly {
            self.weekly = Some(tokio::spawn(
                WeeklyReport {
                    store: self.store.clone(),
                    outbox: self.outbox.clone(),
                    channel: self.channel.clone(),
                    repository: self
                        .name
                        .clone()
                        .unwrap_or_else(|| repository_name(&self.layout)),
                }
                .run(self.watcher_stop.clone()),
            ));
        }
        tracing::info!(
            "{}listening in channel {} (pm model {})",
            self.name
                .as_ref()
                .map(|n| format!("{n}: "))
                .unwrap_or_default(),
            self.channel,
            self.config.product_manager.default_model()
        );
        Ok(())
    }

    /// What the dashboard reads of this repository.
    pub fn dashboard_view(&self) -> crate::dashboard::RepoView {
        crate::dashboard::RepoView {
            name: self
                .name
                .clone()
                .unwrap_or_else(|| repository_name(&self.layout)),
            channel: self.channel.clone(),
            store: self.store.clone(),
            runs: self.supervisor.clone(),
        }
    }

    /// The repository as the App Home shows it: its channel and its store.
    pub fn home_repo(&self) -> super::home::HomeRepo {
        super::home::HomeRepo {
            channel: self.channel.clone(),
            store: self.store.clone(),
        }
    }

    /// The repository as a direct-message conversation may choose it: its name, channel,
    /// who may use it, and its sink.
    pub fn conversation_repo(&self) -> super::conversations::ConversationRepo {
        super::conversations::ConversationRepo {
            name: self
                .name
                .clone()
                .unwrap_or_else(|| self.layout.repo.display().to_string()),
            channel: self.channel.clone(),
            allowed_users: self.config.access.allowed_users.clone(),
            sink: self.sink.clone(),
        }
    }

    /// The repository's store.
    pub fn store(&self) -> &Store {
        &self.store
    }

    /// The repository's outbox.
    pub fn outbox(&self) -> &Outbox {
        &self.outbox
    }

    /// Which instance speaks in a thread of the repository's store (with other instances on
    /// one store: the one holding the thread's lease).
    pub fn ownership(&self) -> Arc<dyn crate::dispatch::Ownership> {
        self.dispatcher.ownership()
    }

    /// The store, when other instances may share it (PostgreSQL).
    pub fn shared_store(&self) -> Option<Store> {
        self.shared.as_ref().map(|_| self.store.clone())
    }

    /// Stops the repository in order: the PR watcher, work in flight (within
    /// [`SHUTDOWN_GRACE`]), the preparations of plans not approved, the runners and the
    /// reports of their ends, the admin socket, the store; then lets go of the lock.
    pub async fn shutdown(self) {
        self.watcher_stop.cancel();
        if let Some(watcher) = self.watcher
            && let Err(e) = watcher.await
        {
            tracing::warn!("pr watcher task: {e}");
        }
        if let Some(merge_order) = self.merge_order
            && let Err(e) = merge_order.await
        {
            tracing::warn!("merge order task: {e}");
        }
        if let Some(weekly) = self.weekly
            && let Err(e) = weekly.await
        {
            tracing::warn!("weekly report task: {e}");
        }
        self.dispatcher.shutdown(SHUTDOWN_GRACE).await;
        self.ahead.shutdown().await;
        self.supervisor.shutdown().await;
        self.followers.close();
        if tokio::time::timeout(SHUTDOWN_GRACE, self.followers.wait())
            .await
            .is_err()
        {
            tracing::warn!(
                "runs' ends still being reported at the stop; the next start reports them"
            );
        }
        if let Some(shared) = self.shared {
            shared.stop.cancel();
            for task in shared.tasks {
                if let Err(e) = task.await {
                    tracing::warn!("lease task: {e}");
                }
            }
            // Its threads are taken over at once rather than when their leases expire.
            if let Err(e) = self.store.deregister_instance(&shared.instance).await {
                tracing::warn!("deregister this instance: {e}");
            }
        }
        self.admin_stop.cancel();
        match self.admin.await {
            Ok(Err(e)) => tracing::warn!("admin socket: {e}"),
            Err(e) => tracing::warn!("admin socket task: {e}"),
            Ok(Ok(())) => {}
        }
        self.store.close().await;
    }
}

impl LockedRepo {
    /// The repository's name, when it has one.
    pub fn name(&self) -> Option<&str> {
        self.repo.name.as_deref()
    }

    /// The channel it serves.
    pub fn channel(&self) -> &str {
        &self.repo.config.slack.channel_id
    }

    /// Its `.codebutler/`.
    pub fn layout(&self) -> &Layout {
        &self.repo.layout
    }

    /// Its merged configuration.
    pub fn config(&self) -> &Config {
        &self.repo.config
    }

    /// Keeps `models`, the provider's model list the start's checks read, for the
    /// repository's gateway (which then does not read it again for prices).
    pub fn knowing_models(&mut self, models: Option<Arc<ModelList>>) {
        self.models = models;
    }

    /// Opens the store, builds the thread handler, sorts out what the last stop cut off and
    /// opens the admin socket; events are not taken yet.
    /// `builds` are the machine's preparation slots, shared by every repository served.
    pub async fn start(
        self,
        slack: &SharedSlack,
        instance: &Instance,
        builds: &BuildSlots,
    ) -> Result<RepoService, StartError> {
        let LockedRepo { repo, lock, models } = self;
        let ServedRepo {
            name,
            layout,
            config,
        } = repo;
        // A repository served on its own goes by its directory's name (its PostgreSQL schema).
        let store_name = name.clone().unwrap_or_else(|| repository_name(&layout));
        let store = Store::connect(&config.store, &store_name, &layout).await?;
        // PostgreSQL: other instances may share this store, so threads go by lease.
        let shared = store.schema().is_some();
        let outbox = if shared {
            store.register_instance(instance).await?;
            Outbox::fenced_by(store.clone(), slack.sender.clone(), &instance.id)
        } else {
            Outbox::new(store.clone(), slack.sender.clone())
        };
        let handler = Arc::new(
            thread_handler(
                &layout,
                &config,
                &store,
                &outbox,
                shared.then_some(instance),
                models,
                builds.clone(),
            )
            .await?,
        );
        let supervisor = handler.coder.supervisor.clone();
        let ahead = handler.coder.ahead.clone();
        let followers = handler.coder.followers.clone();
        let coordination = handler.coder.coordination.clone();
        let write_access = handler.pm.write_access.clone();
        let pm_gateway = handler.pm.gateway.clone();
        if !shared {
            // Before anything can start a run: what the last stop cut off. On a shared
            // store this is done thread by thread as threads are taken (`adopt`).
            crate::reconcile::after_stop(&handler.coder).await;
        }
        log_cleanup(&crate::workspace::orphans::clean_up(&layout, &store).await);
        if !shared {
            // The steps after a pull request opened that the last stop cut off.
            let after_pr = handler.coder.after_pr.clone();
            tokio::spawn(async move { after_pr.resume_all().await });
        }
        let admin_stop = CancellationToken::new();
        let admin = tokio::spawn(crate::admin::server::serve(
            crate::admin::server::AdminService {
                supervisor: supervisor.clone(),
                layout: layout.clone(),
                pr_instructions: config.changes_workflow.pr_instructions.clone(),
            },
            admin_stop.clone(),
        ));
        let (dispatcher, shared) = if shared {
            let leases = Leases::new(
                store.clone(),
                instance.clone(),
                supervisor.clone(),
                LEASE_TTL,
            );
            let dispatcher =
                Dispatcher::shared(store.clone(), handler, Arc::new(leases), IDLE_TIMEOUT);
            let stop = CancellationToken::new();
            let tasks = vec![
                tokio::spawn(crate::thread::lease::heartbeat(
                    store.clone(),
                    instance.clone(),
                    LEASE_TTL,
                    stop.clone(),
                )),
                tokio::spawn({
                    let dispatcher = dispatcher.clone();
                    let stop = stop.clone();
                    async move { dispatcher.watch_pending(WATCH_EVERY, stop).await }
                }),
            ];
            let shared = SharedStore {
                instance: instance.clone(),
                stop,
                tasks,
            };
            (dispatcher, Some(shared))
        } else {
            (Dispatcher::new(store.clone(), handler, IDLE_TIMEOUT), None)
        };
        if coordination.dispatcher.set(dispatcher.clone()).is_err() {
            tracing::warn!("coordination: the thread dispatcher was set already");
        }
        let channel = config.slack.channel_id.clone();
        let sink = Arc::new(IntakeSink {
            filter: IntakeFilter {
                channel: channel.clone(),
                bot_user_id: slack.bot_user_id.clone(),
            },
            store: store.clone(),
            dispatcher: dispatcher.clone(),
            reaction: config
                .triggers
                .reaction
                .clone()
                .map(|emoji| ReactionTrigger {
                    emoji,
                    allowed_users: config.access.allowed_users.clone(),
                    sender: slack.sender.clone(),
                }),
            commands: SlashCommands {
                channel: channel.clone(),
                store: store.clone(),
                allowed_users: config.access.allowed_users.clone(),
                caps: caps(&config),
                pm: PmChoice {
                    store: store.clone(),
                    outbox: outbox.clone(),
                    ownership: dispatcher.ownership(),
                    pool: config
                        .product_manager
                        .models
                        .iter()
                        .map(|(key, choice)| (key.clone(), choice.model.clone()))
                        .collect(),
                    default_model: config.product_manager.default_model().to_owned(),
                    gateway: pm_gateway,
                },
            },
        });
        Ok(RepoService {
            name,
            channel,
            sink,
            layout,
            config,
            store,
            outbox,
            dispatcher,
            supervisor,
            ahead,
            followers,
            admin_stop,
            admin,
            watcher_stop: CancellationToken::new(),
            watcher: None,
            write_access,
            coordination,
            merge_order: None,
            weekly: None,
            shared,
            _lock: lock,
        })
    }
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

/// The thread handler with its PM and Coder: the model gateway (knowing `models`, the
/// provider's model list, when the start read it), the runners' supervisor and the
/// repository the PM reads.
async fn thread_handler(
    layout: &Layout,
    config: &Config,
    store: &Store,
    outbox: &Outbox,
    shared_as: Option<&Instance>,
    models: Option<Arc<ModelList>>,
    builds: BuildSlots,
) -> Result<ThreadHandler, StartError> {
    let fallbacks = crate::gateway::Fallbacks {
        pm: config.product_manager.fallback.clone(),
        coder: config.coder.fallback.clone(),
        reviewer: config.reviewer.as_ref().and_then(|r| r.fallback.clone()),
        researcher: config.researcher.fallback.clone(),
    };
    let gateway = Arc::new(
        Gateway::new(&config.openrouter, store.clone())?
            .knowing_models(models)
            .with_fallbacks(fallbacks),
    );
    let supervisor = runners::supervisor_for(
        layout,
        config,
        store.clone(),
        gateway.clone(),
        shared_as.map(|i| i.id.clone()),
        builds,
    )
    .await?;
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
        over_budget: config.product_manager.over_budget.clone(),
        gh: PathBuf::from(&config.github.cli),
        memory: DefaultBranchMemory::new(&layout.repo),
        write_access: WriteAccess::new(
            config.github.review_from,
            PathBuf::from(&config.github.cli),
            layout.repo.clone(),
        ),
        attachments: Attachments {
            fetcher: FileFetcher::new(&config.slack.bot_token, &config.slack.api_url)?,
            transcriber: Transcriber::new(
                &config.voice,
                &config.openrouter,
                &config.openai,
                store.clone(),
            )?,
            limits: config.attachments,
            layout: layout.clone(),
            configured_models: config
                .product_manager
                .models
                .values()
                .map(|choice| choice.model.clone())
                .chain([config.coder.model.clone()])
                .collect(),
        },
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
    let describer = Describer::new(pm.clone(), outbox.clone(), supervisor.worktrees().clone());
    let coordination = Coordination {
        store: store.clone(),
        pm: pm.clone(),
        repo: layout.repo.clone(),
        prepare: supervisor.worktrees().clone(),
        merge_order: Arc::new(tokio::sync::Notify::new()),
        dispatcher: Arc::new(std::sync::OnceLock::new()),
    };
    let coder = SlackCoder {
        coordination,
        prepare: supervisor.worktrees().clone(),
        ahead: Ahead::new(supervisor.worktrees().clone(), supervisor.clone()),
        followers: TaskTracker::new(),
        pr_instructions: config.changes_workflow.pr_instructions.clone(),
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
    let artist = crate::artist::Artist {
        store: store.clone(),
        layout: layout.clone(),
        gateway: pm.gateway.clone(),
        prompt_model: pm.model.clone(),
        provider: config.artist.provider.clone(),
        image_model: config.artist.model.clone(),
        images: crate::gateway::images::ImagesApi::new(
            &config.openai.base_url,
            config.openai.api_key.clone(),
        )?,
        openrouter: crate::gateway::openrouter_images::OpenRouterImages::new(&config.openrouter)?,
        dollars_per_image: config.artist.dollars_per_image,
        memory: pm.memory.clone(),
        attachments: pm.attachments.clone(),
        prepare: coder.prepare.clone(),
    };
    Ok(ThreadHandler {
        artist,
        channel: config.slack.channel_id.clone(),
        pm,
        coder,
        outbox: outbox.clone(),
        store: store.clone(),
        allowed_users: config.access.allowed_users.clone(),
        developers: crate::thread::permissions::Developers::new(config.access.developers.clone()),
        max_cost_per_thread: config.coder.max_cost_per_thread,
        caps: caps(config),
        merge_strategy: config.github.merge_strategy,
        merge_checks: config.github.merge_checks,
        memory,
        reviewer: config.reviewer.clone(),
        researcher_model: config.researcher.model.clone(),
        fetch: Arc::new(
            crate::runners::fetch::policy(config).map_err(crate::runners::SetupError::from)?,
        ),
    })
}

/// The caps across threads the configuration sets (`access.maxCostPerDay` and the others).
fn caps(config: &Config) -> crate::gateway::caps::Caps {
    crate::gateway::caps::Caps {
        per_day: config.access.max_cost_per_day,
        per_user_per_day: config.access.max_cost_per_user_per_day,
        calls_per_hour: config.access.max_claude_calls_per_hour,
    }
}

/// The OpenRouter model id of `productManager.memoryExtraction` (the default PM model when it
/// is not set; the loader checked it is in the pool).
fn memory_extraction_model(config: &Config) -> String {
    let pm = &config.product_manager;
    pm.models
        .get(&pm.memory_extraction)
        .map_or_else(|| pm.default_model().to_owned(), |m| m.model.clone())
}
