//! What the service and each repository's part ([`super::daemon`]) share: the repository to
//! serve, the Slack app's shared pieces, and the error that stops a start.

use std::path::PathBuf;
use std::sync::Arc;

use crate::config::Config;
use crate::gateway::GatewayError;
use crate::layout::Layout;
use crate::runners;
use crate::slack::api::{Client, Sender};

use super::app_lock;
use super::connections::SharedApp;
use super::preflight::{CheckError, SetupMistake};

/// A failure that stops the service from starting (or, for [`StartError::SharedApp`],
/// running).
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error(transparent)]
    Store(#[from] crate::store::StoreError),
    #[error(transparent)]
    Slack(#[from] crate::slack::api::SlackError),
    #[error("connect to Slack Socket Mode: {}", crate::slack::api::describe(.0))]
    Socket(#[source] slack_morphism::errors::SlackClientError),
    #[error("set up the model gateway: {0}")]
    Gateway(#[from] GatewayError),
    #[error("the images API: {0}")]
    Images(#[from] crate::gateway::images::ImagesError),
    #[error("set up fetching shared files: {0}")]
    Files(#[from] crate::slack::files::FetchRefused),
    #[error("voice notes: {0}")]
    Voice(#[from] crate::gateway::transcribe::TranscribeError),
    #[error("set up runners: {0}")]
    Runners(#[from] runners::SetupError),
    #[error(transparent)]
    Lock(#[from] crate::repo_lock::LockError),
    #[error("open repository {path}: {source}")]
    Repo {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(transparent)]
    AppInUse(#[from] app_lock::AppLockError),
    #[error(transparent)]
    SharedApp(#[from] SharedApp),
    #[error("no repository to serve")]
    NoRepositories,
    #[error("name this instance (host name): {0}")]
    Instance(#[source] std::io::Error),
    #[error("repository `{name}`: {source}")]
    Repository {
        name: String,
        #[source]
        source: Box<StartError>,
    },
    #[error(
        "dashboard: listen on {listen}: {source} (change dashboard.listen in the global config, \
         or stop what uses that port)"
    )]
    Dashboard {
        listen: std::net::SocketAddr,
        source: std::io::Error,
    },
    /// A set-up mistake, said with its fix.
    #[error(transparent)]
    Setup(#[from] SetupMistake),
}

impl From<CheckError> for StartError {
    fn from(e: CheckError) -> Self {
        match e {
            CheckError::Mistake(m) => Self::Setup(m),
            CheckError::Slack(e) => Self::Slack(e),
        }
    }
}

impl StartError {
    /// Another process uses the Slack app (on this host or elsewhere).
    pub fn is_app_in_use(&self) -> bool {
        match self {
            Self::AppInUse(app_lock::AppLockError::Held { .. }) | Self::SharedApp(_) => true,
            Self::Repository { source, .. } => source.is_app_in_use(),
            _ => false,
        }
    }

    /// The daemon's exit code for this end (see `codebutler`'s exit codes): 4 another
    /// process on the Slack app; a set-up mistake's own (2 a setting or an account, 5 this
    /// host, 6 Slack out of reach); 5 for per-thread disks this host cannot make; else 1.
    pub fn exit_code(&self) -> u8 {
        match self {
            _ if self.is_app_in_use() => 4,
            Self::Setup(mistake) => mistake.exit_code(),
            Self::Runners(runners::SetupError::Workspace(
                crate::workspace::SetupError::NoDisks { .. },
            )) => 5,
            Self::Repository { source, .. } => source.exit_code(),
            _ => 1,
        }
    }
}

/// One repository to serve.
#[derive(Clone, Debug)]
pub struct ServedRepo {
    /// Its name in the global config's `repositories`; `None` for `codebutler --repo DIR`.
    pub name: Option<String>,
    /// Its `.codebutler/` (already set up with [`Layout::init`]).
    pub layout: Layout,
    /// Its merged configuration; `slack.channel_id` is the channel it serves.
    pub config: Config,
}

/// What every repository of the process shares of the Slack app.
#[derive(Clone, Debug)]
pub struct SharedSlack {
    pub client: Arc<Client>,
    /// The one paced, rate-limited sender of the app.
    pub sender: Sender,
    /// The bot's user id, learned with `auth.test`.
    pub bot_user_id: String,
}
