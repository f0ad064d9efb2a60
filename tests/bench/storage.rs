//! Bytes a long Coder session writes to the store for its conversation.
//!
//! `cargo bench -p codebutler-controller --bench storage`
//!
//! One scripted 200-turn session (each turn reads a different 3 KB file, as in the `tokens`
//! benchmark) runs through the real Coder loop and tools; its model answers from a script
//! and records each call's conversation exactly as the runner's hub does after every Coder
//! model call, into the real store on SQLite (WAL, `synchronous=NORMAL`, as the daemon opens
//! it). No compaction (a 10M-token window), so the final conversation holds every turn.
//!
//! Measured around the session, three times (medians):
//! - **bytes written**: `wchar` of `/proc/self/io`, the bytes this process handed to
//!   `write(2)`/`pwrite(2)`; nothing else in the process writes during the session (no
//!   logging, the tools only read, the model is in-process), so it is what SQLite wrote to
//!   its WAL and, at checkpoints, to the database file;
//! - the same split in two, from a second session whose checkpoints are held off (a read
//!   transaction opened before it pins the WAL, so SQLite's automatic checkpoint cannot
//!   copy the session's pages): what the commits wrote to the WAL, then what one
//!   checkpoint of the whole WAL afterwards writes to the database file. In WAL mode
//!   every page is written twice, once by its commit and once by a checkpoint;
//! - `write_bytes` of `/proc/self/io` beside it (bytes the kernel counted as dirtied for
//!   the storage layer; a page dirtied twice before writeback counts once);
//! - the WAL's growth: every frame (page) the session's commits wrote, none checkpointed
//!   yet unless the WAL passed SQLite's 1,000-page checkpoint;
//! - the database's growth in pages (`PRAGMA page_count` × page size, before and after),
//!   which counts a page once however often it was rewritten;
//! - the baseline, from the same run: the size of the final conversation as stored.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::VecDeque;
use std::path::Path;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use codebutler_agent::compaction::Compaction;
use codebutler_agent::conversation::{ChatMessage, ToolCall, ToolSpec};
use codebutler_agent::tool::ToolRegistry;
use codebutler_agent::tool_loop::{AssistantReply, ChatModel};
use codebutler_agent::tools::path::RepoRoot;
use codebutler_controller::domain::ThreadKey;
use codebutler_controller::runners::resume::{StoredConversation, after_call};
use codebutler_controller::store::{NewRun, Store};
use codebutler_runner::agent::{CoderTask, Ending, run_coder};
use codebutler_runner::tools::{BashConfig, coder_tools};

const TURNS: usize = 200;
const FILE_BYTES: usize = 3000;
const RUNS: usize = 3;
const RUN_ID: &str = "bench-run";

fn main() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let figures: Vec<Figures> = (0..RUNS).map(|_| runtime.block_on(session())).collect();
    let values = |key: fn(&Figures) -> u64| {
        let mut values: Vec<u64> = figures.iter().map(key).collect();
        values.sort_unstable();
        values
    };
    let conversation = values(|f| f.conversation)[RUNS / 2];
    println!("store writes of a {TURNS}-turn Coder session's conversation (medians of {RUNS})");
    println!("  final conversation (baseline)  {conversation:>12} bytes");
    for (name, key) in [
        (
            "bytes written (wchar)",
            (|f| f.written) as fn(&Figures) -> u64,
        ),
        ("bytes dirtied (write_bytes)", |f| f.dirtied),
        ("WAL growth", |f| f.wal),
        ("page_count growth", |f| f.pages),
        ("written by the commits", |f| f.commits),
        ("WAL growth, no checkpoint", |f| f.held_wal),
        ("written by one checkpoint", |f| f.checkpoint),
    ] {
        let v = values(key);
        println!(
            "  {name:<30} {:>12} bytes  {:>6.2}x the conversation  (runs: {} to {})",
            v[RUNS / 2],
            v[RUNS / 2] as f64 / conversation as f64,
            v[0],
            v[RUNS - 1]
        );
    }
}

struct Figures {
    conversation: u64,
    written: u64,
    dirtied: u64,
    wal: u64,
    pages: u64,
    /// With checkpoints held off: `wchar` during the session, the WAL's growth, and
    /// `wchar` of the checkpoint after it.
    commits: u64,
    held_wal: u64,
    checkpoint: u64,
}

/// One session as the daemon runs it, and one with its checkpoints held off.
async fn session() -> Figures {
    let open = session_in(false).await;
    let held = session_in(true).await;
    assert_eq!(open.conversation, held.conversation);
    Figures {
        commits: held.written,
        held_wal: held.wal,
        checkpoint: held.checkpoint,
        ..open
    }
}

/// Answers from a script and records each call as the runner's hub does.
struct Recording {
    store: Store,
    replies: Mutex<VecDeque<AssistantReply>>,
    stored: tokio::sync::Mutex<StoredConversation>,
}

#[derive(Debug, thiserror::Error)]
#[error("{0}")]
struct BenchError(String);

#[async_trait]
impl ChatModel for Recording {
    type Error = BenchError;

    async fn complete(
        &self,
        messages: &[ChatMessage],
        _tools: &[ToolSpec],
    ) -> Result<AssistantReply, BenchError> {
        let reply = self
            .replies
            .lock()
            .unwrap()
            .pop_front()
            .ok_or_else(|| BenchError("script exhausted".into()))?;
        let conversation = after_call(messages, &reply).unwrap();
        self.stored
            .lock()
            .await
            .save(&self.store, RUN_ID, &conversation)
            .await
            .map_err(|e| BenchError(e.to_string()))?;
        Ok(reply)
    }
}

/// One scripted session into a new store; with `hold_checkpoints`, a read transaction
/// holds SQLite's checkpoints off until the session ended, and then one checkpoint copies
/// the whole WAL into the database (measured as `checkpoint`).
async fn session_in(hold_checkpoints: bool) -> Figures {
    let worktree = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(worktree.path().join("src")).unwrap();
    for i in 0..TURNS {
        let line = format!("// file {i}: some code the Coder reads\n");
        let body = line.repeat(FILE_BYTES / line.len());
        std::fs::write(worktree.path().join(format!("src/f{i}.txt")), body).unwrap();
    }
    let root = Arc::new(RepoRoot::new(worktree.path()).unwrap());
    let mut tools = ToolRegistry::new(32 * 1024);
    for tool in coder_tools(root, BashConfig::default()) {
        tools.register(tool);
    }

    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("s.db");
    let store = Store::open(&db).await.unwrap();
    let thread = ThreadKey {
        channel: "C1".into(),
        thread_ts: "1.1".into(),
    };
    store
        .create_run(NewRun {
            id: RUN_ID,
            thread: &thread,
            plan: "STORAGE-BENCH: read every file under src/.",
            model: "anthropic/claude-sonnet-4.5",
            worktree: &worktree.path().display().to_string(),
            branch: "codebutler/bench",
            max_turns: i64::try_from(TURNS).unwrap() + 5,
        })
        .await
        .unwrap();
    let mut replies: VecDeque<AssistantReply> = (0..TURNS)
        .map(|i| AssistantReply {
            content: None,
            tool_calls: vec![ToolCall::new(
                format!("call_{i}"),
                "Read",
                serde_json::json!({"file_path": format!("src/f{i}.txt")}).to_string(),
            )],
        })
        .collect();
    replies.push_back(AssistantReply {
        content: Some("Read every file.".into()),
        tool_calls: Vec::new(),
    });
    let model = Recording {
        store: store.clone(),
        replies: Mutex::new(replies),
        stored: tokio::sync::Mutex::default(),
    };
    let task = CoderTask {
        system_prompt: "You are the Coder. ".repeat(200),
        plan: "STORAGE-BENCH: read every file under src/.".into(),
        max_turns: u32::try_from(TURNS).unwrap() + 5,
        timeout: std::time::Duration::from_secs(600),
        resume: Vec::new(),
        disk: None,
    };
    let compaction = Compaction {
        context_window: 10_000_000,
        ..Compaction::default()
    };
    let (inbox_tx, mut inbox) = tokio::sync::mpsc::channel(1);
    let (events, mut event_rx) = tokio::sync::mpsc::channel(64);
    let drain = tokio::spawn(async move { while event_rx.recv().await.is_some() {} });

    let wal_before = wal_size(&db);
    let pages_before = page_bytes(&db).await;
    let reader = if hold_checkpoints {
        Some(pin_wal(&db).await)
    } else {
        None
    };
    let io_before = io();
    let (ending, _) = run_coder(&model, &tools, task, compaction, &mut inbox, &events).await;
    let io_after = io();
    let wal_after = wal_size(&db);
    let pages_after = page_bytes(&db).await;
    let checkpoint = match reader {
        Some(reader) => checkpoint_after(reader).await,
        None => 0,
    };

    drop((inbox_tx, events));
    drain.await.unwrap();
    assert!(
        matches!(ending, Ending::Completed { .. }),
        "the session did not complete: {ending:?}"
    );
    let conversation = store.run_conversation(RUN_ID).await.unwrap().unwrap();
    let stored: Vec<ChatMessage> = serde_json::from_str(&conversation).unwrap();
    assert_eq!(
        stored.len(),
        2 * TURNS + 2,
        "plan, every turn and the answer"
    );
    store.close().await;
    Figures {
        conversation: conversation.len() as u64,
        written: io_after.0 - io_before.0,
        dirtied: io_after.1 - io_before.1,
        wal: wal_after.saturating_sub(wal_before),
        pages: pages_after.saturating_sub(pages_before),
        commits: 0,
        held_wal: 0,
        checkpoint,
    }
}

/// A connection to `db` inside a read transaction: while it lasts, no checkpoint can
/// copy what later commits write to the WAL.
async fn pin_wal(db: &Path) -> sqlx::SqliteConnection {
    use sqlx::{ConnectOptions, Executor};
    let mut conn = sqlx::sqlite::SqliteConnectOptions::new()
        .filename(db)
        .connect()
        .await
        .unwrap();
    conn.execute("BEGIN").await.unwrap();
    let runs: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM runs")
        .fetch_one(&mut conn)
        .await
        .unwrap();
    assert_eq!(runs, 1);
    conn
}

/// Ends `reader`'s transaction, then checkpoints the whole WAL into the database on its
/// connection; the bytes written meanwhile.
async fn checkpoint_after(mut reader: sqlx::SqliteConnection) -> u64 {
    use sqlx::{Connection, Executor};
    reader.execute("COMMIT").await.unwrap();
    let before = io().0;
    let (busy, _, _): (i64, i64, i64) = sqlx::query_as("PRAGMA wal_checkpoint(TRUNCATE)")
        .fetch_one(&mut reader)
        .await
        .unwrap();
    let written = io().0 - before;
    assert_eq!(busy, 0, "the checkpoint could not finish");
    reader.close().await.unwrap();
    written
}

/// `wchar` and `write_bytes` of this process.
fn io() -> (u64, u64) {
    let text = std::fs::read_to_string("/proc/self/io").unwrap();
    let field = |name: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().parse::<u64>().ok())
            .unwrap()
    };
    (field("wchar:"), field("write_bytes:"))
}

/// The size of the store's WAL.
fn wal_size(db: &Path) -> u64 {
    std::fs::metadata(db.with_extension("db-wal")).map_or(0, |m| m.len())
}

/// The database's size in pages (committed ones, the WAL's included), as bytes, read on a
/// read-only connection of its own.
async fn page_bytes(db: &Path) -> u64 {
    use sqlx::{ConnectOptions, Connection};
    let mut conn = sqlx::sqlite::SqliteConnectOptions::new()
        .filename(db)
        .read_only(true)
        .connect()
        .await
        .unwrap();
    let count: i64 = sqlx::query_scalar("PRAGMA page_count")
        .fetch_one(&mut conn)
        .await
        .unwrap();
    let size: i64 = sqlx::query_scalar("PRAGMA page_size")
        .fetch_one(&mut conn)
        .await
        .unwrap();
    conn.close().await.unwrap();
    u64::try_from(count * size).unwrap()
}
