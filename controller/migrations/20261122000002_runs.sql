-- Coder runs and their event logs. Portable SQL (SQLite and PostgreSQL).

-- One row per run of a sandboxed runner.
-- state: 'queued', 'running', 'finished', 'failed', 'cancelled', 'interrupted'.
CREATE TABLE runs (
    id                 TEXT PRIMARY KEY,
    channel_id         TEXT NOT NULL,
    thread_ts          TEXT NOT NULL,
    state              TEXT NOT NULL,
    plan               TEXT NOT NULL,
    model              TEXT NOT NULL,
    worktree           TEXT NOT NULL,
    max_turns          INTEGER NOT NULL,
    turns              INTEGER NOT NULL DEFAULT 0,
    prompt_tokens      BIGINT NOT NULL DEFAULT 0,
    completion_tokens  BIGINT NOT NULL DEFAULT 0,
    cost               DOUBLE PRECISION NOT NULL DEFAULT 0,
    ending             TEXT,
    exit_code          INTEGER,
    runner_pid         INTEGER,
    created_at         TEXT NOT NULL,
    started_at         TEXT,
    ended_at           TEXT
);
CREATE INDEX runs_by_thread ON runs (channel_id, thread_ts, created_at);
CREATE INDEX runs_by_state ON runs (state);

-- Every event a runner sent, in order: the protobuf-encoded RunnerEvent, hex.
CREATE TABLE run_events (
    run_id      TEXT NOT NULL,
    seq         BIGINT NOT NULL,
    body        TEXT NOT NULL,
    created_at  TEXT NOT NULL,
    PRIMARY KEY (run_id, seq)
);
