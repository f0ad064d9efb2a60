//! The store's migrations on a real PostgreSQL server (a throw-away cluster started here),
//! so installations that outgrow SQLite can use them unchanged.

use std::path::PathBuf;
use std::process::Command;

use codebutler_controller::store::MIGRATOR;
use sqlx::Row;
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};

/// A PostgreSQL server binary from Debian's layout or PATH.
fn pg_bin(name: &str) -> PathBuf {
    let mut found: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .map(|v| v.path().join("bin").join(name))
        .filter(|p| p.is_file())
        .collect();
    found.sort();
    found.pop().unwrap_or_else(|| PathBuf::from(name))
}

fn output(cmd: &mut Command) -> String {
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "{cmd:?} failed: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// PostgreSQL refuses to run as root: run its tools as the `postgres` user then.
fn pg_command(name: &str) -> Command {
    if output(Command::new("id").arg("-u")) == "0" {
        let mut cmd = Command::new("runuser");
        cmd.args(["-u", "postgres", "--"]).arg(pg_bin(name));
        cmd
    } else {
        Command::new(pg_bin(name))
    }
}

struct Cluster {
    _dir: tempfile::TempDir,
    data: PathBuf,
    socket_dir: PathBuf,
    port: u16,
}

impl Cluster {
    fn start() -> Cluster {
        let dir = tempfile::tempdir().unwrap();
        if output(Command::new("id").arg("-u")) == "0" {
            let uid: u32 = output(Command::new("id").args(["-u", "postgres"]))
                .parse()
                .unwrap();
            let gid: u32 = output(Command::new("id").args(["-g", "postgres"]))
                .parse()
                .unwrap();
            std::os::unix::fs::chown(dir.path(), Some(uid), Some(gid)).unwrap();
        }
        let data = dir.path().join("data");
        output(pg_command("initdb").arg("-D").arg(&data).args([
            "-U",
            "postgres",
            "--auth=trust",
            "-E",
            "UTF8",
            "--no-sync",
        ]));
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let socket_dir = dir.path().to_owned();
        let options = format!(
            "-p {port} -k {} -c listen_addresses='' -c fsync=off",
            socket_dir.display()
        );
        output(
            pg_command("pg_ctl")
                .arg("-D")
                .arg(&data)
                .args(["-o", &options, "-w", "-l"])
                .arg(dir.path().join("server.log"))
                .arg("start"),
        );
        Cluster {
            _dir: dir,
            data,
            socket_dir,
            port,
        }
    }

    fn options(&self) -> PgConnectOptions {
        PgConnectOptions::new()
            .host(&self.socket_dir.display().to_string())
            .port(self.port)
            .username("postgres")
            .database("postgres")
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let _ = pg_command("pg_ctl")
            .arg("-D")
            .arg(&self.data)
            .args(["-m", "immediate", "stop"])
            .output();
    }
}

#[tokio::test]
async fn migrations_run_on_postgresql() {
    let cluster = Cluster::start();
    let pool = PgPoolOptions::new()
        .max_connections(2)
        .connect_with(cluster.options())
        .await
        .unwrap();
    MIGRATOR.run(&pool).await.unwrap();
    // Running them again is a no-op, as on every start.
    MIGRATOR.run(&pool).await.unwrap();

    // The statements the store relies on work here too.
    for _ in 0..2 {
        sqlx::query(
            "INSERT INTO messages (channel_id, ts, thread_ts, user_id, text, event_id, received_at) \
             VALUES ($1, $2, $2, 'U1', 'hi', 'Ev1', 'now') ON CONFLICT (channel_id, ts) DO NOTHING",
        )
        .bind("C1")
        .bind("1.1")
        .execute(&pool)
        .await
        .unwrap();
    }
    sqlx::query(
        "INSERT INTO usage (id, channel_id, thread_ts, role, model, prompt_tokens, completion_tokens, cached_tokens, cost, created_at) \
         VALUES ('u1', 'C1', '1.1', 'pm', 'm', 10, 5, 0, 0.25, 'now')",
    )
    .execute(&pool)
    .await
    .unwrap();
    let row = sqlx::query(
        "SELECT COUNT(*) AS n, (SELECT COALESCE(SUM(cost), 0.0) FROM usage) AS cost FROM messages WHERE state = 'pending'",
    )
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(row.get::<i64, _>("n"), 1);
    assert_eq!(row.get::<f64, _>("cost"), 0.25);
    let tables: Vec<String> = sqlx::query_scalar(
        "SELECT table_name::text FROM information_schema.tables WHERE table_schema = 'public' ORDER BY 1",
    )
    .fetch_all(&pool)
    .await
    .unwrap();
    assert_eq!(
        tables,
        [
            "_sqlx_migrations",
            "coder_questions",
            "conversation_messages",
            "memory_proposals",
            "messages",
            "outbox",
            "run_checkpoints",
            "run_events",
            "runs",
            "thread_budgets",
            "thread_steps",
            "threads",
            "usage"
        ]
    );
    pool.close().await;
}
