//! The two databases the store runs on, and every statement that differs between them.
//!
//! Queries are written once, in SQL both SQLite and PostgreSQL accept, and run through sqlx's
//! `Any` driver with `$1, $2, …` placeholders (sqlx-sqlite binds a `$N` parameter to the
//! N-th argument, so a query reads the same on both). What cannot be written once lives
//! here, and only here:
//!
//! - **opening**: SQLite's pragmas (WAL, `synchronous=NORMAL`, busy timeout, foreign keys) on
//!   every new connection, and its page size ([`PAGE_SIZE`], a store made with another one
//!   converted once); on PostgreSQL the repository's own schema (`codebutler_<name>`,
//!   created if missing) as the `search_path` of every connection, so the migrations and
//!   every query of one repository stay inside its schema;
//! - **the write transaction** ([`Backend::begin_write`]): SQLite's `BEGIN IMMEDIATE` takes
//!   the database's write lock at once, so the store's read-then-write sections (the next
//!   outbox `seq`, the next conversation `seq`, a proposal's revision) never interleave. On
//!   PostgreSQL the same sections take a transaction-scoped advisory lock keyed by the
//!   schema, the exact counterpart: writers of one repository are serialised (across hosts,
//!   too), readers and other repositories are not;
//! - **the database's clock** ([`Backend::now_ms`]): "now" in milliseconds since the epoch,
//!   for the rows several hosts compare (instances and thread leases), so hosts with skewed
//!   clocks agree.

use std::str::FromStr;
use std::time::Duration;

use sqlx::any::{AnyConnectOptions, AnyPoolOptions};
use sqlx::sqlite::SqliteConnectOptions;
use sqlx::{Any, AnyPool, ConnectOptions, Connection, Executor};

use super::StoreError;
use crate::secret::Secret;

/// SQLite's page size for the store, in bytes. A commit writes every page it changed whole,
/// so the page is the unit of what each write costs: at SQLite's default of 4 KB, appending
/// a Coder turn of about 4 KB (one row, one model call) wrote four pages — its leaf, the
/// parent, the key's index and the header — 4.2× the turn; at 1 KB it writes the row's few
/// pages and little else (tests/bench/README.md: store writes). The store's rows are small or
/// read whole, so smaller pages cost no extra reads that matter.
pub(crate) const PAGE_SIZE: i64 = 1024;
const PAGE_SIZE_PRAGMA: &str = "PRAGMA page_size = 1024";

/// Connections per repository's pool.
const MAX_CONNECTIONS: u32 = 4;

/// The advisory lock key that serialises creating schemas (far above any schema oid, the
/// keys of the write locks).
const SCHEMA_LOCK: i64 = 0x436f_6465_4275_746c; // "CodeButl"

/// Where the store lives: `store.url` in the global configuration.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StoreUrl {
    /// The embedded default: one SQLite file per repository (`.codebutler/store.db`).
    Sqlite,
    /// A PostgreSQL server (`postgres://…`): each repository in a schema of its own. The URL
    /// can hold a password, so it is a [`Secret`].
    Postgres(Secret),
}

/// A `store.url` that is neither `sqlite` nor a PostgreSQL URL. Never shows the value, nor
/// any part of the URL but a parameter's name.
#[derive(Debug, thiserror::Error)]
pub enum StoreUrlError {
    #[error("must be \"sqlite\" or a postgres:// URL")]
    Scheme,
    #[error("is not a valid PostgreSQL URL: {0}")]
    Invalid(String),
    #[error(
        "has a parameter `{0}` PostgreSQL does not know (its value is not shown); the parameters \
         are {known}",
        known = KNOWN_PARAMETERS.join(", ")
    )]
    UnknownParameter(String),
    #[error("has a value for `{parameter}` that is not {expected} (the value is not shown)")]
    BadValue {
        parameter: String,
        expected: &'static str,
    },
}

/// The query parameters a PostgreSQL store URL may carry: the ones sqlx reads. sqlx ignores
/// any other with a warning that quotes its value (a mistyped `?passwd=…` would put a
/// password in the log), so the URL is checked here first and such a parameter refused.
const KNOWN_PARAMETERS: [&str; 18] = [
    "sslmode",
    "ssl-mode",
    "sslrootcert",
    "ssl-root-cert",
    "ssl-ca",
    "sslcert",
    "ssl-cert",
    "sslkey",
    "ssl-key",
    "statement-cache-capacity",
    "host",
    "hostaddr",
    "port",
    "dbname",
    "user",
    "password",
    "application_name",
    "options",
];

/// The values `sslmode` takes (sqlx quotes any other in its error).
const SSL_MODES: [&str; 6] = [
    "disable",
    "allow",
    "prefer",
    "require",
    "verify-ca",
    "verify-full",
];

/// Checks the query of a PostgreSQL URL before sqlx reads it: every parameter known, and the
/// values sqlx would quote in an error (or parse into a number or an address) well-formed.
fn check_parameters(value: &str) -> Result<(), StoreUrlError> {
    // sqlx parses the URL the same way; a URL that does not parse is sqlx's error below.
    let Ok(url) = reqwest::Url::parse(value) else {
        return Ok(());
    };
    for (key, value) in url.query_pairs() {
        let bad = |expected| StoreUrlError::BadValue {
            parameter: key.to_string(),
            expected,
        };
        match &*key {
            "sslmode" | "ssl-mode" => {
                if !SSL_MODES.contains(&value.to_ascii_lowercase().as_str()) {
                    return Err(bad(
                        "one of disable, allow, prefer, require, verify-ca, verify-full",
                    ));
                }
            }
            "port" => {
                value.parse::<u16>().map_err(|_| bad("a port number"))?;
            }
            "statement-cache-capacity" => {
                value.parse::<usize>().map_err(|_| bad("a number"))?;
            }
            "hostaddr" => {
                value
                    .parse::<std::net::IpAddr>()
                    .map_err(|_| bad("an IP address"))?;
            }
            known if KNOWN_PARAMETERS.contains(&known) => {}
            // `options[name]=value`: a run-time setting of each connection.
            setting if setting.starts_with("options[") && setting.ends_with(']') => {}
            unknown => {
                return Err(StoreUrlError::UnknownParameter(
                    unknown.chars().take(40).collect(),
                ));
            }
        }
    }
    Ok(())
}

impl StoreUrl {
    /// Reads `sqlite` or `postgres://…` (also `postgresql://…`).
    pub fn parse(value: &str) -> Result<Self, StoreUrlError> {
        let value = value.trim();
        if value == "sqlite" {
            return Ok(Self::Sqlite);
        }
        if !(value.starts_with("postgres://") || value.starts_with("postgresql://")) {
            return Err(StoreUrlError::Scheme);
        }
        // Checked now, so a bad URL stops the start with a config error; the reason names
        // what is wrong, never the URL itself. Its parameters first: sqlx would log an
        // unknown one's value.
        check_parameters(value)?;
        sqlx::postgres::PgConnectOptions::from_str(value)
            .map_err(|e| StoreUrlError::Invalid(redact_error(&e.to_string(), value)))?;
        Ok(Self::Postgres(Secret::new(value)))
    }
}

/// `message` with `secret` cut out, in case a parser quoted its input.
fn redact_error(message: &str, secret: &str) -> String {
    message.replace(secret, "<redacted>")
}

/// Which database a store runs on.
#[derive(Clone, Debug)]
pub(crate) enum Backend {
    Sqlite,
    /// `write_lock`: the advisory lock key of the repository's schema (its oid).
    Postgres {
        schema: String,
        write_lock: i64,
    },
}

impl Backend {
    /// Starts a write transaction that excludes every other writer of this store until it
    /// ends (see the module doc).
    pub(crate) async fn begin_write(
        &self,
        pool: &AnyPool,
    ) -> Result<sqlx::Transaction<'static, Any>, StoreError> {
        match self {
            Self::Sqlite => Ok(pool.begin_with("BEGIN IMMEDIATE").await?),
            Self::Postgres { write_lock, .. } => {
                let mut tx = pool.begin().await?;
                sqlx::query("SELECT pg_advisory_xact_lock($1)")
                    .bind(*write_lock)
                    .execute(&mut *tx)
                    .await?;
                Ok(tx)
            }
        }
    }

    /// An SQL expression for the database's clock: milliseconds since the epoch, as a
    /// BIGINT, the same everywhere in one statement.
    pub(crate) fn now_ms(&self) -> &'static str {
        match self {
            // SQLite reads 'now' once per statement.
            Self::Sqlite => "CAST((julianday('now') - 2440587.5) * 86400000 AS BIGINT)",
            Self::Postgres { .. } => {
                "CAST(EXTRACT(EPOCH FROM statement_timestamp()) * 1000 AS BIGINT)"
            }
        }
    }
}

/// Opens (creating if needed) the SQLite file at `path`. Neither it nor the files SQLite
/// keeps beside it (`-wal`, `-shm`, `-journal`) may be a link: SQLite would read and write
/// through it.
pub(crate) async fn open_sqlite(path: &std::path::Path) -> Result<AnyPool, StoreError> {
    sqlx::any::install_default_drivers();
    for suffix in ["", "-wal", "-shm", "-journal"] {
        let mut name = path.as_os_str().to_owned();
        name.push(suffix);
        let file = std::path::PathBuf::from(name);
        if std::fs::symlink_metadata(&file).is_ok_and(|m| m.file_type().is_symlink()) {
            return Err(StoreError::Link {
                path: file.display().to_string(),
            });
        }
    }
    let open_err = |source| StoreError::Open {
        path: path.display().to_string(),
        source,
    };
    let url = SqliteConnectOptions::new()
        .filename(path)
        .create_if_missing(true)
        .to_url_lossy();
    let options = AnyConnectOptions::from_url(&url).map_err(open_err)?;
    if let Err(e) = use_page_size(&options).await {
        // The store still works with the pages it has; only its writes cost more.
        tracing::warn!(
            "could not convert the store {} to {PAGE_SIZE}-byte pages: {e}",
            path.display()
        );
    }
    AnyPoolOptions::new()
        .max_connections(MAX_CONNECTIONS)
        .after_connect(|conn, _| {
            Box::pin(async move {
                for pragma in [
                    // Before anything writes a new database's header; a no-op later.
                    PAGE_SIZE_PRAGMA,
                    "PRAGMA busy_timeout = 5000",
                    "PRAGMA journal_mode = WAL",
                    "PRAGMA synchronous = NORMAL",
                    "PRAGMA foreign_keys = ON",
                ] {
                    conn.execute(pragma).await?;
                }
                Ok(())
            })
        })
        .acquire_timeout(Duration::from_secs(30))
        .connect_with(options)
        .await
        .map_err(open_err)
}

/// Gives the SQLite store [`PAGE_SIZE`]-byte pages: a new database gets them before its
/// first table, an existing one with other pages is rewritten once (`VACUUM`, which can only
/// change the page size outside WAL mode; the daemon holds the repository's lock, so no
/// other connection is open). A database already at that size is left alone.
async fn use_page_size(options: &AnyConnectOptions) -> Result<(), sqlx::Error> {
    let mut conn = sqlx::AnyConnection::connect_with(options).await?;
    conn.execute("PRAGMA busy_timeout = 5000").await?;
    let size: i64 = sqlx::query_scalar("PRAGMA page_size")
        .fetch_one(&mut conn)
        .await?;
    if size != PAGE_SIZE {
        let tables: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM sqlite_schema")
            .fetch_one(&mut conn)
            .await?;
        conn.execute("PRAGMA journal_mode = DELETE").await?;
        conn.execute(PAGE_SIZE_PRAGMA).await?;
        conn.execute("VACUUM").await?;
        if tables > 0 {
            tracing::info!("the store now uses {PAGE_SIZE}-byte pages (it used {size})");
        }
    }
    conn.close().await
}

/// A repository name as it appears in its schema's name: lower-cased, every character
/// outside `[a-z0-9_]` made `_` (one for one). Two repositories whose names sanitize alike
/// would share a schema, so the configuration compares names this way too.
pub fn sanitized_name(name: &str) -> String {
    name.chars()
        .map(|c| match c.to_ascii_lowercase() {
            c @ ('a'..='z' | '0'..='9' | '_') => c,
            _ => '_',
        })
        .collect()
}

/// The schema of the repository named `repository`: `codebutler_` and its
/// [`sanitized_name`].
pub fn schema_name(repository: &str) -> Result<String, StoreError> {
    let sanitized = sanitized_name(repository);
    let schema = format!("codebutler_{sanitized}");
    // PostgreSQL cuts identifiers at 63 bytes: refuse rather than let two long names meet.
    if sanitized.is_empty() || schema.len() > 63 {
        return Err(StoreError::SchemaName {
            repository: repository.to_owned(),
        });
    }
    Ok(schema)
}

/// Connects to the PostgreSQL server at `url`, creating `repository`'s schema if missing, and
/// returns a pool whose connections work inside it, with its backend.
pub(crate) async fn open_postgres(
    url: &Secret,
    repository: &str,
) -> Result<(AnyPool, Backend), StoreError> {
    sqlx::any::install_default_drivers();
    let schema = schema_name(repository)?;
    let target = redacted(url);
    let open_err = |source| StoreError::Open {
        path: target.clone(),
        source,
    };
    let options = AnyConnectOptions::from_str(url.expose()).map_err(open_err)?;
    let mut conn = sqlx::AnyConnection::connect_with(&options)
        .await
        .map_err(open_err)?;
    let write_lock = claim_schema(&mut conn, &schema, repository).await?;
    conn.close().await?;
    let search_path = format!("SET search_path TO \"{schema}\"");
    let pool = AnyPoolOptions::new()
        .max_connections(MAX_CONNECTIONS)
        .after_connect(move |conn, _| {
            let search_path = search_path.clone();
            Box::pin(async move {
                conn.execute(search_path.as_str()).await?;
                Ok(())
            })
        })
        .acquire_timeout(Duration::from_secs(30))
        .connect_with(options)
        .await
        .map_err(open_err)?;
    Ok((pool, Backend::Postgres { schema, write_lock }))
}

/// Creates `schema` if missing and marks it as `repository`'s (its comment), or checks that
/// it is: two repository names that sanitize alike must not share one schema. Serialised by
/// an advisory lock, so hosts starting together do not race. Returns the schema's oid.
async fn claim_schema(
    conn: &mut sqlx::AnyConnection,
    schema: &str,
    repository: &str,
) -> Result<i64, StoreError> {
    let owner = format!("codebutler repository {repository}");
    let mut tx = conn.begin().await?;
    sqlx::query("SELECT pg_advisory_xact_lock($1)")
        .bind(SCHEMA_LOCK)
        .execute(&mut *tx)
        .await?;
    tx.execute(format!("CREATE SCHEMA IF NOT EXISTS \"{schema}\"").as_str())
        .await?;
    let (oid, comment) = sqlx::query_as::<_, (i64, Option<String>)>(
        "SELECT CAST(oid AS BIGINT), obj_description(oid, 'pg_namespace') FROM pg_namespace \
         WHERE nspname = $1",
    )
    .bind(schema)
    .fetch_one(&mut *tx)
    .await?;
    match comment {
        None => {
            // A literal, not a parameter: COMMENT takes no parameters. The name is quoted
            // as SQL quotes a string.
            let quoted = owner.replace('\'', "''");
            tx.execute(format!("COMMENT ON SCHEMA \"{schema}\" IS '{quoted}'").as_str())
                .await?;
        }
        Some(comment) if comment == owner => {}
        Some(comment) => {
            return Err(StoreError::SchemaTaken {
                schema: schema.to_owned(),
                repository: repository.to_owned(),
                owner: comment,
            });
        }
    }
    tx.commit().await?;
    Ok(oid)
}

/// The URL without its password or query (which may hold one), for errors: the user, host,
/// port and database.
fn redacted(url: &Secret) -> String {
    match AnyConnectOptions::from_str(url.expose()) {
        Ok(options) => {
            let url = options.database_url;
            let user = match url.username() {
                "" => String::new(),
                user => format!("{user}@"),
            };
            let port = url.port().map(|p| format!(":{p}")).unwrap_or_default();
            format!(
                "{}://{user}{}{port}{}",
                url.scheme(),
                url.host_str().unwrap_or_default(),
                url.path()
            )
        }
        Err(_) => "<the store URL>".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schema_names_are_sanitized_and_bounded() {
        assert_eq!(schema_name("api").unwrap(), "codebutler_api");
        assert_eq!(schema_name("Web-App.v2").unwrap(), "codebutler_web_app_v2");
        assert_eq!(schema_name("naïve").unwrap(), "codebutler_na_ve");
        assert!(schema_name("").is_err());
        assert!(schema_name(&"x".repeat(53)).is_err());
        assert_eq!(schema_name(&"x".repeat(52)).unwrap().len(), 63);
    }

    #[test]
    fn store_urls_are_sqlite_or_postgres_and_never_shown() {
        assert_eq!(StoreUrl::parse("sqlite").unwrap(), StoreUrl::Sqlite);
        let url = "postgres://cb:hunter2@db.internal:5432/codebutler";
        let parsed = StoreUrl::parse(url).unwrap();
        assert_eq!(parsed, StoreUrl::Postgres(Secret::new(url)));
        assert!(!format!("{parsed:?}").contains("hunter2"));
        assert!(StoreUrl::parse("postgresql://localhost/x").is_ok());
        for bad in ["mysql://root@localhost/x", "", "store.db"] {
            assert!(
                matches!(StoreUrl::parse(bad), Err(StoreUrlError::Scheme)),
                "{bad}"
            );
        }
        let err = StoreUrl::parse("postgres://cb:hunter2@db:notaport/x").unwrap_err();
        assert!(!err.to_string().contains("hunter2"), "{err}");
        assert_eq!(
            redacted(&Secret::new(url)),
            "postgres://cb@db.internal:5432/codebutler"
        );
    }

    /// A mistyped parameter or a bad `sslmode` is refused before sqlx reads the URL (sqlx
    /// would log the parameter's value, or quote it in its error): the error names the
    /// parameter, never its value nor the password.
    #[test]
    fn unknown_parameters_and_bad_values_are_named_without_their_values() {
        let typo = "postgres://cb:pw-hunter2@db:5432/x?passwd=value-hunter3";
        let err = StoreUrl::parse(typo).unwrap_err();
        assert!(
            matches!(&err, StoreUrlError::UnknownParameter(p) if p == "passwd"),
            "{err:?}"
        );
        let shown = err.to_string();
        assert!(shown.contains("`passwd`"), "{shown}");
        assert!(
            !shown.contains("hunter2") && !shown.contains("hunter3"),
            "{shown}"
        );

        for (url, parameter) in [
            ("postgres://cb:pw-hunter2@db/x?sslmode=hunter3", "sslmode"),
            ("postgres://cb:pw-hunter2@db/x?ssl-mode=hunter3", "ssl-mode"),
            ("postgres://cb:pw-hunter2@db/x?port=hunter3", "port"),
            ("postgres://cb:pw-hunter2@db/x?hostaddr=hunter3", "hostaddr"),
        ] {
            let err = StoreUrl::parse(url).unwrap_err();
            assert!(
                matches!(&err, StoreUrlError::BadValue { parameter: p, .. } if p == parameter),
                "{url}: {err:?}"
            );
            let shown = err.to_string();
            assert!(shown.contains(&format!("`{parameter}`")), "{shown}");
            assert!(
                !shown.contains("hunter2") && !shown.contains("hunter3"),
                "{shown}"
            );
        }

        for good in [
            "postgres://cb:pw@db/x?sslmode=verify-full&application_name=codebutler",
            "postgres://cb:pw@db/x?SSLMODE=x&sslmode=Require"
                .replace("SSLMODE=x&", "")
                .as_str(),
            "postgres://cb@db/x?options[statement_timeout]=5000&port=5433",
            "postgresql:///x?host=/var/run/postgresql&user=cb&password=pw",
        ] {
            assert!(StoreUrl::parse(good).is_ok(), "{good}");
        }
    }

    async fn page_size(pool: &AnyPool) -> i64 {
        sqlx::query_scalar("PRAGMA page_size")
            .fetch_one(pool)
            .await
            .unwrap()
    }

    /// A new store gets small pages; one made with SQLite's default 4 KB pages (stores made
    /// before) is converted once, its rows kept, and stays in WAL mode.
    #[tokio::test]
    async fn sqlite_stores_use_small_pages_and_old_ones_are_converted() {
        let dir = tempfile::tempdir().unwrap();
        let new = open_sqlite(&dir.path().join("new.db")).await.unwrap();
        new.execute("CREATE TABLE t (x TEXT)").await.unwrap();
        assert_eq!(page_size(&new).await, PAGE_SIZE);

        let path = dir.path().join("old.db");
        let url = SqliteConnectOptions::new()
            .filename(&path)
            .create_if_missing(true)
            .to_url_lossy();
        let options = AnyConnectOptions::from_url(&url).unwrap();
        let mut old = sqlx::AnyConnection::connect_with(&options).await.unwrap();
        for statement in [
            "PRAGMA page_size = 4096",
            "PRAGMA journal_mode = WAL",
            "CREATE TABLE t (x TEXT)",
            "INSERT INTO t VALUES ('kept')",
        ] {
            old.execute(statement).await.unwrap();
        }
        let before: i64 = sqlx::query_scalar("PRAGMA page_size")
            .fetch_one(&mut old)
            .await
            .unwrap();
        assert_eq!(before, 4096);
        old.close().await.unwrap();

        let converted = open_sqlite(&path).await.unwrap();
        assert_eq!(page_size(&converted).await, PAGE_SIZE);
        let kept: String = sqlx::query_scalar("SELECT x FROM t")
            .fetch_one(&converted)
            .await
            .unwrap();
        assert_eq!(kept, "kept");
        let mode: String = sqlx::query_scalar("PRAGMA journal_mode")
            .fetch_one(&converted)
            .await
            .unwrap();
        assert_eq!(mode, "wal");
    }

    /// The store's file, or its write-ahead log, made a link (to a host file) is refused
    /// before SQLite opens anything: the host file is left as it was.
    #[tokio::test]
    async fn a_store_file_that_is_a_link_is_refused() {
        for suffix in ["", "-wal"] {
            let dir = tempfile::tempdir().unwrap();
            let target = dir.path().join("target");
            std::fs::write(&target, "kept").unwrap();
            let store = dir.path().join("store.db");
            let link = dir.path().join(format!("store.db{suffix}"));
            std::os::unix::fs::symlink(&target, &link).unwrap();
            let err = open_sqlite(&store).await.unwrap_err();
            assert!(matches!(err, StoreError::Link { .. }), "{suffix}: {err:?}");
            assert!(err.to_string().contains("symbolic link"), "{err}");
            assert_eq!(std::fs::read_to_string(&target).unwrap(), "kept");
        }
    }

    /// Two repositories on one server each see only their own rows; a name that sanitizes
    /// like another's is refused instead of sharing its schema.
    #[tokio::test]
    async fn repositories_on_one_server_keep_to_their_own_schemas() {
        use crate::domain::IncomingMessage;
        use crate::store::Store;

        let url = crate::store::testing::postgres_url();
        let dir = tempfile::tempdir().unwrap();
        let layout = crate::layout::Layout::new(dir.path());
        let base = codebutler_test_support::postgres::unique_name("iso");
        let api = Store::connect(&url, &format!("{base}-api"), &layout)
            .await
            .unwrap();
        let web = Store::connect(&url, &format!("{base}-web"), &layout)
            .await
            .unwrap();
        assert_eq!(
            api.schema(),
            Some(format!("codebutler_{base}_api").as_str())
        );
        let msg = IncomingMessage {
            channel: "C1".into(),
            ts: "1.1".into(),
            thread_ts: "1.1".into(),
            user: "U1".into(),
            text: "hi".into(),
            event_id: None,
            origin: crate::domain::Origin::Person,
        };
        assert!(api.record_message(&msg).await.unwrap());
        assert_eq!(api.threads_with_pending().await.unwrap().len(), 1);
        assert!(web.threads_with_pending().await.unwrap().is_empty());
        assert!(web.record_message(&msg).await.unwrap(), "web's own copy");

        let err = Store::connect(&url, &format!("{base}.api"), &layout)
            .await
            .expect_err("the same schema as another repository");
        assert_eq!(
            err.to_string(),
            format!(
                "schema codebutler_{base}_api for repository \"{base}.api\" already holds another repository (codebutler repository {base}-api); rename one of them"
            )
        );
        // The repository itself comes back to its schema.
        let again = Store::connect(&url, &format!("{base}-api"), &layout)
            .await
            .unwrap();
        assert_eq!(again.threads_with_pending().await.unwrap().len(), 1);
    }
}
