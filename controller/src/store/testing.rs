//! Store tests on both databases: each test is an `async fn(&Store)`, run once on a fresh
//! SQLite file and once in a fresh schema of this test process's throw-away PostgreSQL
//! cluster (`codebutler_test_support::postgres`), by [`on_both_backends`]; tests that
//! open a store more than once, or prepare it with an older schema first
//! ([`Place::old_schema`]), take a [`Place`] instead ([`on_both_places`]).

use sqlx::AnyPool;
use tempfile::TempDir;

use super::{NewRun, Store, StoreUrl, ThreadKey, backend};
use crate::layout::Layout;

/// A store for one test, with what must live as long as it.
pub(crate) struct TestStore {
    pub store: Store,
    _dir: TempDir,
}

/// A person's message `ts` with `text` in the thread `thread_ts` of channel `C1`, by `U1`.
pub(crate) fn message(thread_ts: &str, ts: &str, text: &str) -> crate::domain::IncomingMessage {
    crate::domain::IncomingMessage {
        channel: "C1".into(),
        ts: ts.into(),
        thread_ts: thread_ts.into(),
        user: "U1".into(),
        text: text.into(),
        event_id: None,
        origin: crate::domain::Origin::Person,
    }
}

/// Records run `id` of `thread`, with placeholder plan, model, worktree and branch.
pub(crate) async fn create_run(store: &Store, id: &str, thread: &ThreadKey) {
    store
        .create_run(NewRun {
            id,
            thread,
            plan: "p",
            model: "m",
            worktree: "/w",
            branch: "codebutler/x",
            max_turns: 5,
        })
        .await
        .unwrap();
}

/// A store in a new SQLite file.
pub(crate) async fn sqlite() -> TestStore {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&dir.path().join("store.db")).await.unwrap();
    TestStore { store, _dir: dir }
}

/// A store in a new schema of the test process's PostgreSQL cluster, as a repository of
/// its own would have it.
pub(crate) async fn postgres() -> TestStore {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::connect(
        &postgres_url(),
        &codebutler_test_support::postgres::unique_name("t"),
        &Layout::new(dir.path()),
    )
    .await
    .unwrap();
    assert!(store.schema().is_some());
    TestStore { store, _dir: dir }
}

/// A store in a new SQLite file, and a second handle on the same file with a pool of its
/// own: two instances sharing one store.
pub(crate) async fn sqlite_pair() -> (TestStore, Store) {
    let first = sqlite().await;
    let second = Store::open(&first._dir.path().join("store.db"))
        .await
        .unwrap();
    (first, second)
}

/// A store in a new PostgreSQL schema, and a second handle on the same schema with a pool
/// of its own: two instances (two hosts) sharing one store.
pub(crate) async fn postgres_pair() -> (TestStore, Store) {
    let dir = tempfile::tempdir().unwrap();
    let name = codebutler_test_support::postgres::unique_name("t");
    let layout = Layout::new(dir.path());
    let first = Store::connect(&postgres_url(), &name, &layout)
        .await
        .unwrap();
    let second = Store::connect(&postgres_url(), &name, &layout)
        .await
        .unwrap();
    assert_eq!(first.schema(), second.schema());
    (
        TestStore {
            store: first,
            _dir: dir,
        },
        second,
    )
}

/// The URL of the test process's PostgreSQL cluster (started on first use).
pub(crate) fn postgres_url() -> StoreUrl {
    let cluster = codebutler_test_support::postgres::shared();
    StoreUrl::parse(&cluster.url("postgres")).unwrap()
}

/// Runs each named `async fn(&Store)` of the enclosing module as two tests,
/// `sqlite::<name>` and `postgres::<name>`.
macro_rules! on_both_backends {
    ($($test:ident),+ $(,)?) => {
        mod sqlite {
            $(
                #[tokio::test]
                async fn $test() {
                    let t = $crate::store::testing::sqlite().await;
                    super::$test(&t.store).await;
                }
            )+
        }
        mod postgres {
            $(
                #[tokio::test]
                async fn $test() {
                    let t = $crate::store::testing::postgres().await;
                    super::$test(&t.store).await;
                }
            )+
        }
    };
}
pub(crate) use on_both_backends;

/// Where a test's store lives, not opened yet: a SQLite file, or a repository's schema on
/// the test process's PostgreSQL cluster.
pub(crate) enum Place {
    Sqlite(TempDir),
    Postgres { repository: String, dir: TempDir },
}

impl Place {
    pub(crate) fn sqlite() -> Self {
        Self::Sqlite(tempfile::tempdir().unwrap())
    }

    pub(crate) fn postgres() -> Self {
        Self::Postgres {
            repository: codebutler_test_support::postgres::unique_name("t"),
            dir: tempfile::tempdir().unwrap(),
        }
    }

    /// A scratch directory beside the store.
    pub(crate) fn dir(&self) -> &std::path::Path {
        match self {
            Self::Sqlite(dir) | Self::Postgres { dir, .. } => dir.path(),
        }
    }

    /// Opens the store here, as the daemon does (migrations applied).
    pub(crate) async fn open(&self) -> Store {
        match self {
            Self::Sqlite(dir) => Store::open(&dir.path().join("store.db")).await.unwrap(),
            Self::Postgres { repository, dir } => {
                Store::connect(&postgres_url(), repository, &Layout::new(dir.path()))
                    .await
                    .unwrap()
            }
        }
    }

    /// A pool on the database here with no migration applied (the SQLite file, or the
    /// repository's schema as its `search_path`), to lay down an older schema.
    pub(crate) async fn bare_pool(&self) -> AnyPool {
        match self {
            Self::Sqlite(dir) => backend::open_sqlite(&dir.path().join("store.db"))
                .await
                .unwrap(),
            Self::Postgres { repository, .. } => {
                let StoreUrl::Postgres(url) = postgres_url() else {
                    unreachable!("the cluster's URL is a PostgreSQL URL")
                };
                backend::open_postgres(&url, repository).await.unwrap().0
            }
        }
    }

    /// A pool on the database here with the migrations before `cutoff` applied, as the
    /// daemon released before that migration would have left it.
    pub(crate) async fn old_schema(&self, cutoff: &str) -> AnyPool {
        let migrations = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("migrations");
        let old = self.dir().join("old-migrations");
        std::fs::create_dir(&old).unwrap();
        for entry in std::fs::read_dir(&migrations).unwrap() {
            let entry = entry.unwrap();
            let name = entry.file_name().into_string().unwrap();
            if name.as_str() < cutoff {
                std::fs::copy(entry.path(), old.join(&name)).unwrap();
            }
        }
        let pool = self.bare_pool().await;
        sqlx::migrate::Migrator::new(old.as_path())
            .await
            .unwrap()
            .run(&pool)
            .await
            .unwrap();
        pool
    }
}

/// Runs each named `async fn(&Place)` of the enclosing module as two tests,
/// `sqlite::<name>` and `postgres::<name>`.
macro_rules! on_both_places {
    ($($test:ident),+ $(,)?) => {
        mod sqlite_place {
            $(
                #[tokio::test]
                async fn $test() {
                    super::$test(&$crate::store::testing::Place::sqlite()).await;
                }
            )+
        }
        mod postgres_place {
            $(
                #[tokio::test]
                async fn $test() {
                    super::$test(&$crate::store::testing::Place::postgres()).await;
                }
            )+
        }
    };
}
pub(crate) use on_both_places;
