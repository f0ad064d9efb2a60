//! `codebutler --status`: the topology, as an operator asks for it — which repositories
//! (name, path, channel, store), whether a service holds each (the pid from its lock, read
//! from the kernel's lock table without touching the lock), which process holds the Slack
//! app on this host, and each repository's active threads and runs. Gathering reads the
//! stores (a running service keeps writing: SQLite's WAL lets a reader in); rendering is
//! pure text, tested by equality.
//!
//! Hosts and thread leases belong to a PostgreSQL store shared by several hosts; they have
//! their place in [`Status::hosts`], which is empty for SQLite. Whether the service is
//! installed, enabled and running under the host's service manager is
//! [`Status::service_unit`] ([`super::install::unit_status`]).
//!
//! The text is one block per part, each rendered by its own function in [`render`]'s order:
//! a new part of the status (like the toolchains found for the sandbox) is a field of
//! [`Status`] and one more block.

use std::path::{Path, PathBuf};

use super::install::{Scope, UnitStatus};
use crate::domain::{RunRecord, ThreadSummary};
use crate::layout::Layout;
use crate::repo_lock;
use crate::secret::Secret;
use crate::store::{Store, StoreUrl};
use crate::workspace::toolchains::Toolchains;

/// How many active threads and runs are listed per repository.
const LIST_LIMIT: usize = 20;

/// One repository to describe.
#[derive(Clone, Debug)]
pub struct RepoRef {
    /// Its name (`None` for `--repo DIR`).
    pub name: Option<String>,
    pub path: PathBuf,
    pub channel: String,
}

/// Whether a process holds a lock.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Holder {
    /// Nobody.
    Free,
    /// The process with this pid.
    Pid(u32),
    /// The lock table could not be read.
    Unknown(String),
}

/// What a repository's store says.
#[derive(Clone, Debug)]
pub enum StoreView {
    /// Not created yet: the service never ran there.
    Absent,
    /// Active (not closed) threads, most recent first, and queued or running runs.
    Read {
        threads: Vec<ThreadSummary>,
        runs: Vec<RunRecord>,
    },
    /// It could not be read.
    Failed(String),
}

/// One repository's status.
#[derive(Clone, Debug)]
pub struct RepoStatus {
    pub repo: RepoRef,
    /// The store's kind and location, as the operator would look for it.
    pub store: String,
    pub service: Holder,
    pub view: StoreView,
}

/// One host of a shared store and the threads it holds (PostgreSQL; see the module doc).
#[derive(Clone, Debug)]
pub struct HostStatus {
    /// The instance's id (host name, pid, start time).
    pub instance: String,
    /// The threads whose lease it holds.
    pub leases: Vec<String>,
}

/// The whole topology.
#[derive(Clone, Debug)]
pub struct Status {
    /// The Slack app's lock on this host.
    pub app: Holder,
    /// The service under the host's service manager (`codebutler --install`).
    pub service_unit: UnitStatus,
    pub repositories: Vec<RepoStatus>,
    /// Hosts sharing the store and their leases: empty with SQLite (one host).
    pub hosts: Vec<HostStatus>,
    /// The toolchains the sandbox shows, found as the service finds them
    /// ([`crate::workspace::toolchains`]); `None` when `sandbox.findToolchains` is off.
    pub toolchains: Option<Vec<String>>,
}

/// Reads the status of `repos` (the Slack app's lock under `home`, for `app_token`), each
/// from its store where `store_url` says; on a shared PostgreSQL store, the live instances
/// and their leases too. `service_unit` is what the service manager said; `toolchains`
/// what [`Toolchains::of_this_process`] found (`None`: finding them is off).
pub async fn gather(
    repos: Vec<RepoRef>,
    home: &Path,
    app_token: &Secret,
    store_url: &StoreUrl,
    service_unit: UnitStatus,
    toolchains: Option<&Toolchains>,
) -> Status {
    let app = holder(&super::app_lock::path(home, app_token));
    let mut repositories = Vec::with_capacity(repos.len());
    let mut hosts: Vec<HostStatus> = Vec::new();
    for repo in repos {
        let layout = Layout::new(&repo.path);
        let service = holder(&repo_lock::lock_path(&layout.dir));
        let (store, view) = match store_url {
            StoreUrl::Sqlite => {
                let store_path = layout.store();
                let view = read_sqlite(&store_path).await;
                (format!("sqlite {}", store_path.display()), view)
            }
            StoreUrl::Postgres(_) => {
                let name = repo
                    .name
                    .clone()
                    .unwrap_or_else(|| crate::store::repository_name(&layout));
                read_postgres(store_url, &name, &layout, &mut hosts).await
            }
        };
        repositories.push(RepoStatus {
            store,
            repo,
            service,
            view,
        });
    }
    Status {
        app,
        service_unit,
        repositories,
        hosts,
        toolchains: toolchains.map(Toolchains::lines),
    }
}

fn holder(path: &Path) -> Holder {
    match repo_lock::holder(path) {
        Ok(None) => Holder::Free,
        Ok(Some(pid)) => Holder::Pid(pid),
        Err(e) => Holder::Unknown(e.to_string()),
    }
}

async fn read_sqlite(path: &Path) -> StoreView {
    if !path.exists() {
        return StoreView::Absent;
    }
    match Store::open(path).await {
        Ok(store) => {
            let view = read_store(&store).await;
            store.close().await;
            view
        }
        Err(e) => StoreView::Failed(e.to_string()),
    }
}

/// A repository's schema on the shared server: its view, and its instances' leases added to
/// `hosts` (one entry per instance, leases named `<repository>/<thread ts>`).
async fn read_postgres(
    url: &StoreUrl,
    name: &str,
    layout: &Layout,
    hosts: &mut Vec<HostStatus>,
) -> (String, StoreView) {
    let store = match Store::connect(url, name, layout).await {
        Ok(store) => store,
        Err(e) => {
            return (
                format!("postgres ({name})"),
                StoreView::Failed(e.to_string()),
            );
        }
    };
    let label = format!("postgres schema {}", store.schema().unwrap_or(name));
    let view = read_store(&store).await;
    let live = store.live_instances(crate::store::LEASE_TTL).await;
    let leases = store.leases().await;
    match (live, leases) {
        (Ok(live), Ok(leases)) => {
            for instance in live {
                let pos = match hosts.iter().position(|h| h.instance == instance.id) {
                    Some(pos) => pos,
                    None => {
                        hosts.push(HostStatus {
                            instance: instance.id.clone(),
                            leases: Vec::new(),
                        });
                        hosts.len() - 1
                    }
                };
                hosts[pos].leases.extend(
                    leases
                        .iter()
                        .filter(|l| l.owner == instance.id && l.expires_in_ms > 0)
                        .map(|l| format!("{name}/{}", l.thread.thread_ts)),
                );
            }
        }
        (Err(e), _) | (_, Err(e)) => tracing::warn!("read the instances of {name}: {e}"),
    }
    store.close().await;
    (label, view)
}

async fn read_store(store: &Store) -> StoreView {
    let threads = store.list_threads(|s| !s.is_closed(), LIST_LIMIT).await;
    let runs = store.list_runs(true, LIST_LIMIT as i64).await;
    match (threads, runs) {
        (Ok(threads), Ok(runs)) => StoreView::Read { threads, runs },
        (Err(e), _) | (_, Err(e)) => StoreView::Failed(e.to_string()),
    }
}

/// Appends one line to `out`.
macro_rules! line {
    ($out:expr) => {
        $out.push('\n')
    };
    ($out:expr, $($arg:tt)*) => {{
        $out.push_str(&format!($($arg)*));
        $out.push('\n');
    }};
}

/// The status as text: the Slack app, the service unit, one block per repository, the hosts.
pub fn render(status: &Status) -> String {
    let mut out = String::new();
    render_app(&mut out, status);
    render_service_unit(&mut out, &status.service_unit);
    render_toolchains(&mut out, status.toolchains.as_deref());
    render_repositories(&mut out, &status.repositories);
    render_hosts(&mut out, &status.hosts);
    out
}

fn render_app(out: &mut String, status: &Status) {
    line!(out, "slack app: {}", holder_text(&status.app));
}

fn render_service_unit(out: &mut String, unit: &UnitStatus) {
    match unit {
        UnitStatus::NotInstalled => {
            line!(out, "service: not installed (codebutler --install)");
        }
        UnitStatus::Installed {
            path,
            scope,
            enabled,
            running,
        } => {
            let scope = match scope {
                Scope::User => "user",
                Scope::System => "system",
            };
            line!(out, "service: installed, {scope} ({})", path.display());
            line!(out, "  enabled  {enabled}");
            line!(out, "  running  {running}");
        }
    }
}

fn render_toolchains(out: &mut String, toolchains: Option<&[String]>) {
    match toolchains {
        None => line!(
            out,
            "toolchains: not looked for (sandbox.findToolchains false)"
        ),
        Some([]) => line!(out, "toolchains: none found"),
        Some(found) => {
            line!(out, "toolchains: {}", found.len());
            for t in found {
                line!(out, "  {t}");
            }
        }
    }
}

fn render_repositories(out: &mut String, repositories: &[RepoStatus]) {
    line!(out, "repositories: {}", repositories.len());
    for r in repositories {
        let name = r.repo.name.as_deref().unwrap_or("(--repo)");
        line!(out, "\n{name}");
        line!(out, "  path     {}", r.repo.path.display());
        line!(out, "  channel  {}", r.repo.channel);
        line!(out, "  store    {}", r.store);
        line!(out, "  service  {}", holder_text(&r.service));
        match &r.view {
            StoreView::Absent => {
                line!(out, "  threads  none (no store yet)");
            }
            StoreView::Failed(e) => {
                line!(out, "  threads  unknown: {e}");
            }
            StoreView::Read { threads, runs } => {
                line!(out, "  threads  {} active", threads.len());
                for t in threads {
                    line!(out, "    {}  {}", t.key, t.stage.as_str());
                }
                line!(out, "  runs     {} active", runs.len());
                for run in runs {
                    line!(
                        out,
                        "    {}  {}  {}",
                        run.id,
                        run.thread,
                        run.state.as_str()
                    );
                }
            }
        }
    }
}

fn render_hosts(out: &mut String, hosts: &[HostStatus]) {
    line!(out);
    if hosts.is_empty() {
        line!(out, "hosts: this one (each store is one host's)");
    } else {
        line!(out, "hosts: {}", hosts.len());
        for host in hosts {
            line!(
                out,
                "  {}  {} lease(s): {}",
                host.instance,
                host.leases.len(),
                host.leases.join(", ")
            );
        }
    }
}

fn holder_text(holder: &Holder) -> String {
    match holder {
        Holder::Free => "not running".to_owned(),
        Holder::Pid(pid) => format!("running (pid {pid})"),
        Holder::Unknown(e) => format!("unknown ({e})"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::{RunState, Stage, ThreadKey};

    fn thread(ts: &str, stage: Stage) -> ThreadSummary {
        ThreadSummary {
            key: ThreadKey {
                channel: "CAPI".into(),
                thread_ts: ts.into(),
            },
            stage,
            plan: None,
            pull_request: None,
            updated_at: "2026-11-24T10:00:00Z".into(),
        }
    }

    #[test]
    fn the_topology_reads_as_one_block_per_repository() {
        let run = RunRecord {
            id: "run-1".into(),
            thread: ThreadKey {
                channel: "CAPI".into(),
                thread_ts: "1700000000.000200".into(),
            },
            state: RunState::Running,
            plan: String::new(),
            model: "m".into(),
            worktree: String::new(),
            branch: String::new(),
            max_turns: 1,
            turns: 0,
            prompt_tokens: 0,
            completion_tokens: 0,
            cost: 0.0,
            ending: None,
            exit_code: None,
            runner_pid: None,
            created_at: String::new(),
            started_at: None,
            ended_at: None,
        };
        let status = Status {
            app: Holder::Pid(42),
            service_unit: UnitStatus::Installed {
                path: "/root/.config/systemd/user/codebutler.service".into(),
                scope: Scope::User,
                enabled: "enabled".into(),
                running: "active".into(),
            },
            repositories: vec![
                RepoStatus {
                    repo: RepoRef {
                        name: Some("api".into()),
                        path: "/srv/api".into(),
                        channel: "CAPI".into(),
                    },
                    store: "sqlite /srv/api/.codebutler/store.db".into(),
                    service: Holder::Pid(42),
                    view: StoreView::Read {
                        threads: vec![
                            thread("1700000000.000100", Stage::PlanPending),
                            thread("1700000000.000200", Stage::Approved),
                        ],
                        runs: vec![run],
                    },
                },
                RepoStatus {
                    repo: RepoRef {
                        name: Some("web".into()),
                        path: "/srv/web".into(),
                        channel: "CWEB".into(),
                    },
                    store: "sqlite /srv/web/.codebutler/store.db".into(),
                    service: Holder::Free,
                    view: StoreView::Absent,
                },
            ],
            hosts: Vec::new(),
            toolchains: Some(vec![
                "rustup (/root/.rustup, /root/.cargo/bin)".into(),
                "pyenv 3.11.7 (/root/.pyenv/versions/3.11.7)".into(),
            ]),
        };
        assert_eq!(
            render(&status),
            "slack app: running (pid 42)
service: installed, user (/root/.config/systemd/user/codebutler.service)
  enabled  enabled
  running  active
toolchains: 2
  rustup (/root/.rustup, /root/.cargo/bin)
  pyenv 3.11.7 (/root/.pyenv/versions/3.11.7)
repositories: 2

api
  path     /srv/api
  channel  CAPI
  store    sqlite /srv/api/.codebutler/store.db
  service  running (pid 42)
  threads  2 active
    1700000000.000100  plan_pending
    1700000000.000200  approved
  runs     1 active
    run-1  1700000000.000200  running

web
  path     /srv/web
  channel  CWEB
  store    sqlite /srv/web/.codebutler/store.db
  service  not running
  threads  none (no store yet)

hosts: this one (each store is one host's)
"
        );
    }
}
