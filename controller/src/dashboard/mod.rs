//! The dashboard: a read-only HTTP server (off unless the global config has a `dashboard`
//! section) showing what the service does — each repository's threads ([`threads`]), the
//! Coder runs' events as they happen and the log as it is written ([`live`], over
//! server-sent events), costs per day, model, role, repository and person
//! ([`crate::domain::Costs`], also as JSON at `/api/costs`) — and Prometheus' `/metrics` ([`crate::metrics`]).
//!
//! It is its own module rather than a part of [`crate::service`] because it only reads: the
//! stores, the supervisors' run broadcasts, the log ring and the metrics. The service
//! starts it once every repository has started and hands it those; it never changes a
//! thread, a run or a setting. It shows the repositories this service serves and nothing
//! else; of what people wrote it shows a thread's title (its first line, cut), never a
//! prompt, a model's text or a secret. Every request passes [`auth`] first, `/metrics`
//! included (a scraper sends the token as a bearer header).
//!
//! Pages are plain server-rendered HTML ([`html`]: everything from outside escaped) with a
//! little inline script for `EventSource`; nothing is loaded from elsewhere.

pub mod auth;
pub mod html;
pub mod live;
pub mod threads;

use std::fmt::Write;
use std::sync::Arc;

use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::http::header::CONTENT_TYPE;
use axum::response::sse::{KeepAlive, Sse};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::get;
use futures::StreamExt;
use tokio_util::sync::CancellationToken;

use crate::domain::Costs;
use crate::logging::LogRing;
use crate::runners::supervisor::Supervisor;
use crate::secret::Secret;
use crate::store::{Store, StoreError};

/// One repository as the dashboard reads it.
#[derive(Clone, Debug)]
pub struct RepoView {
    /// Its name (its directory's name when the service serves it alone).
    pub name: String,
    /// The channel it serves.
    pub channel: String,
    pub store: Store,
    /// Whose broadcast carries its runs' events.
    pub runs: Supervisor,
}

/// What the dashboard shows and who may see it.
#[derive(Debug)]
pub struct Dashboard {
    pub repos: Vec<RepoView>,
    pub logs: LogRing,
    /// What a request must show; `None` on a loopback address without one.
    pub token: Option<Secret>,
}

/// A page that could not be made: said as a 500, the cause in the log only.
#[derive(Debug, thiserror::Error)]
pub enum PageError {
    #[error("dashboard: read the store of {repository}: {source}")]
    Store {
        repository: String,
        source: StoreError,
    },
    #[error("dashboard: encode the metrics: {0}")]
    Metrics(#[from] std::fmt::Error),
}

impl IntoResponse for PageError {
    fn into_response(self) -> Response {
        tracing::warn!("{self}");
        (
            StatusCode::INTERNAL_SERVER_ERROR,
            "the dashboard could not read what it shows; the service's log says why\n",
        )
            .into_response()
    }
}

/// Serves `dashboard` on `listener` until `stop` is cancelled; the streams open then end.
pub async fn serve(
    listener: tokio::net::TcpListener,
    dashboard: Dashboard,
    stop: CancellationToken,
) -> std::io::Result<()> {
    let app = router(dashboard, stop.clone());
    axum::serve(listener, app)
        .with_graceful_shutdown(stop.cancelled_owned())
        .await
}

/// The routes, behind the token's check.
fn router(dashboard: Dashboard, stop: CancellationToken) -> Router {
    let gate = Arc::new(auth::Gate::new(dashboard.token.clone()));
    let state = Arc::new(Shared { dashboard, stop });
    Router::new()
        .route("/", get(threads_page))
        .route("/runs", get(runs_page))
        .route("/logs", get(logs_page))
        .route("/costs", get(costs_page))
        .route("/api/costs", get(costs_json))
        .route("/api/runs/events", get(run_events))
        .route("/api/logs", get(log_lines))
        .route("/metrics", get(metrics))
        .with_state(state)
        .layer(axum::middleware::from_fn_with_state(
            gate,
            auth::require_token,
        ))
}

/// The handlers' state: the dashboard, and what ends its streams.
#[derive(Debug)]
struct Shared {
    dashboard: Dashboard,
    stop: CancellationToken,
}

type AppState = State<Arc<Shared>>;

async fn threads_page(State(s): AppState) -> Result<Html<String>, PageError> {
    let now = chrono::Utc::now();
    let mut body = String::new();
    for repo in &s.dashboard.repos {
        let threads = repo
            .store
            .thread_overviews(threads::THREADS_LISTED)
            .await
            .map_err(|source| PageError::Store {
                repository: repo.name.clone(),
                source,
            })?;
        body.push_str(&threads::section(&repo.name, &repo.channel, &threads, now));
    }
    Ok(Html(html::page("Threads", &body, "")))
}

async fn runs_page(State(s): AppState) -> Result<Html<String>, PageError> {
    let mut rows = Vec::new();
    for repo in &s.dashboard.repos {
        let runs = repo
            .store
            .list_runs(true, 50)
            .await
            .map_err(|source| PageError::Store {
                repository: repo.name.clone(),
                source,
            })?;
        for run in runs {
            rows.push(vec![
                html::escape(&repo.name),
                html::escape(&run.id),
                html::escape(&run.thread.thread_ts),
                html::escape(run.state.as_str()),
                html::escape(&run.model),
                format!("{} / {}", run.turns, run.max_turns),
                html::dollars(run.cost),
            ]);
        }
    }
    let mut body = String::from("<h2>Active runs</h2>");
    body.push_str(&html::table(
        &[
            "repository",
            "run",
            "thread",
            "state",
            "model",
            "turns",
            "cost",
        ],
        &rows,
        &[5, 6],
    ));
    body.push_str(
        "<h2>Events <small id=\"stream\" data-stream=\"connecting\">connecting</small></h2>\
         <ol id=\"events\"></ol>",
    );
    Ok(Html(html::page("Live runs", &body, live::RUNS_SCRIPT)))
}

async fn logs_page() -> Html<String> {
    let body = "<p>The service's recent log lines, then each new one as it is written. \
                <small id=\"stream\" data-stream=\"connecting\">connecting</small></p>\
                <pre id=\"log\"></pre>";
    Html(html::page("Log", body, live::LOG_SCRIPT))
}

/// Every repository's costs.
async fn read_costs(s: &Shared) -> Result<Costs, PageError> {
    let mut rows = Vec::with_capacity(s.dashboard.repos.len());
    for repo in &s.dashboard.repos {
        let spend = repo
            .store
            .spend()
            .await
            .map_err(|source| PageError::Store {
                repository: repo.name.clone(),
                source,
            })?;
        rows.push((repo.name.clone(), spend));
    }
    Ok(Costs::of(&rows))
}

async fn costs_json(State(s): AppState) -> Result<Response, PageError> {
    Ok(axum::Json(read_costs(&s).await?).into_response())
}

async fn costs_page(State(s): AppState) -> Result<Html<String>, PageError> {
    let costs = read_costs(&s).await?;
    let mut body = String::new();
    let _ = write!(
        body,
        "<p id=\"total\">All repositories: {} in {} model calls ({} tokens). \
         As JSON: <a href=\"/api/costs\">/api/costs</a>.</p>",
        html::dollars(costs.total.cost_usd),
        costs.total.calls,
        costs.total.tokens
    );
    for (heading, lines) in [
        ("Per day", &costs.by_day),
        ("Per model", &costs.by_model),
        ("Per role", &costs.by_role),
        ("Per repository", &costs.by_repository),
        ("Per person", &costs.by_person),
    ] {
        let rows: Vec<Vec<String>> = lines
            .iter()
            .map(|l| {
                vec![
                    html::escape(&l.key),
                    l.calls.to_string(),
                    l.tokens.to_string(),
                    html::dollars(l.cost_usd),
                ]
            })
            .collect();
        let _ = write!(body, "<h2>{heading}</h2>");
        body.push_str(&html::table(
            &["", "calls", "tokens", "cost"],
            &rows,
            &[1, 2, 3],
        ));
    }
    Ok(Html(html::page("Costs", &body, "")))
}

async fn run_events(State(s): AppState) -> impl IntoResponse {
    let receivers = s
        .dashboard
        .repos
        .iter()
        .map(|r| (r.name.clone(), r.runs.subscribe()))
        .collect();
    let events = live::run_events(receivers).take_until(s.stop.clone().cancelled_owned());
    Sse::new(events).keep_alive(KeepAlive::default())
}

async fn log_lines(State(s): AppState) -> impl IntoResponse {
    let (kept, live) = s.dashboard.logs.follow();
    let lines = live::log_lines(kept, live).take_until(s.stop.clone().cancelled_owned());
    Sse::new(lines).keep_alive(KeepAlive::default())
}

async fn metrics() -> Result<Response, PageError> {
    let text = crate::metrics::encode()?;
    Ok(([(CONTENT_TYPE, crate::metrics::CONTENT_TYPE)], text).into_response())
}
