//! A throw-away PostgreSQL cluster for tests: Debian's server binaries (`postgresql`
//! package), `initdb` into a temporary directory, listening only on a Unix socket there,
//! run as the `postgres` user when the tests run as root (PostgreSQL refuses root).
//!
//! One cluster per test process, started on first use ([`shared`]); tests take a database
//! or a schema of their own in it ([`unique_name`]). A static is never dropped, so the
//! cluster's end is left to a watchdog: a small shell in its own process group that waits
//! for end-of-file on a pipe only this process holds, then stops the server and removes the
//! directory. However the test process ends (success, panic, SIGKILL), the pipe closes and
//! the cluster goes with it.
//!
//! Without the server binaries this panics, saying what to install: a test that needs
//! PostgreSQL never passes without it.

use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock};

/// A running cluster.
#[derive(Debug)]
pub struct PgCluster {
    dir: PathBuf,
    port: u16,
    /// The watchdog and its stdin: closed when this process ends, which stops the cluster.
    /// (The watchdog outlives this process on purpose, so it is never waited for.)
    _watchdog: Mutex<(Child, ChildStdin)>,
}

/// The cluster of this test process, started on first use.
pub fn shared() -> &'static PgCluster {
    static CLUSTER: OnceLock<PgCluster> = OnceLock::new();
    CLUSTER.get_or_init(PgCluster::start)
}

/// A name no other test of this process (or of another process, on another cluster) takes:
/// `<prefix>_<pid>_<n>`, lower case, fit for a database, a schema or a repository name.
pub fn unique_name(prefix: &str) -> String {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    format!(
        "{prefix}_{}_{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

impl PgCluster {
    fn start() -> PgCluster {
        let initdb = pg_bin("initdb");
        let dir = tempfile_dir();
        if is_root() {
            let uid = output(Command::new("id").args(["-u", "postgres"]));
            let gid = output(Command::new("id").args(["-g", "postgres"]));
            std::os::unix::fs::chown(&dir, Some(uid.parse().unwrap()), Some(gid.parse().unwrap()))
                .unwrap();
        }
        let data = dir.join("data");
        output(as_postgres(&initdb).arg("-D").arg(&data).args([
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
        let options = format!(
            "-p {port} -k {} -c listen_addresses='' -c fsync=off -c max_connections=200",
            dir.display()
        );
        let pg_ctl = pg_bin("pg_ctl");
        output(
            as_postgres(&pg_ctl)
                .arg("-D")
                .arg(&data)
                .args(["-o", &options, "-w", "-l"])
                .arg(dir.join("server.log"))
                .arg("start"),
        );
        let stop = as_postgres(&pg_ctl);
        let mut watchdog = Command::new("sh");
        watchdog
            .args([
                "-c",
                r#"cat >/dev/null; "$@" -D "$PGWATCH_DATA" -m immediate stop; rm -rf "$PGWATCH_DIR""#,
                "pg-watchdog",
            ])
            .arg(stop.get_program())
            .args(stop.get_args())
            .env("PGWATCH_DATA", &data)
            .env("PGWATCH_DIR", &dir)
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        std::os::unix::process::CommandExt::process_group(&mut watchdog, 0);
        let mut child = watchdog.spawn().unwrap();
        let stdin = child.stdin.take().unwrap();
        PgCluster {
            dir,
            port,
            _watchdog: Mutex::new((child, stdin)),
        }
    }

    /// The directory holding the server's socket.
    pub fn socket_dir(&self) -> &Path {
        &self.dir
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// A URL for `database` as the `postgres` superuser, through the Unix socket.
    pub fn url(&self, database: &str) -> String {
        format!(
            "postgres://postgres@localhost:{}/{database}?host={}",
            self.port,
            self.dir.display()
        )
    }

    /// Runs `sql` with `psql` in `database` and returns its unaligned, tuples-only output.
    pub fn psql(&self, database: &str, sql: &str) -> String {
        output(
            as_postgres(&pg_bin("psql"))
                .args(["-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1"])
                .arg("-h")
                .arg(&self.dir)
                .args([
                    "-p",
                    &self.port.to_string(),
                    "-U",
                    "postgres",
                    "-d",
                    database,
                ])
                .args(["-c", sql]),
        )
    }

    /// Creates a database of its own for a test and returns its name.
    pub fn create_database(&self, prefix: &str) -> String {
        let name = unique_name(prefix);
        self.psql("postgres", &format!("CREATE DATABASE \"{name}\""));
        name
    }
}

/// A PostgreSQL server binary from Debian's layout (the newest version installed).
fn pg_bin(name: &str) -> PathBuf {
    let mut found: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .map(|v| v.path().join("bin").join(name))
        .filter(|p| p.is_file())
        .collect();
    found.sort();
    found.pop().unwrap_or_else(|| {
        panic!(
            "PostgreSQL's {name} is not in /usr/lib/postgresql/*/bin: install Debian's \
             postgresql package (.ci/run does) to run the PostgreSQL tests"
        )
    })
}

fn is_root() -> bool {
    output(Command::new("id").arg("-u")) == "0"
}

/// `program`, run as the `postgres` user when this process is root.
fn as_postgres(program: &Path) -> Command {
    if is_root() {
        let mut cmd = Command::new("runuser");
        cmd.args(["-u", "postgres", "--"]).arg(program);
        cmd
    } else {
        Command::new(program)
    }
}

/// A new private directory the cluster owns; removed by the watchdog.
fn tempfile_dir() -> PathBuf {
    let dir = std::env::temp_dir().join(unique_name("codebutler-pg"));
    std::fs::create_dir(&dir).unwrap();
    dir
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
