-- What a Coder run needs to be resumed or undone. Portable SQL (SQLite and PostgreSQL).

-- The run's own branch, and its latest conversation (a JSON array of chat messages without
-- the system prompt), kept up to date on every model call so a crashed run can continue.
ALTER TABLE runs ADD COLUMN branch TEXT NOT NULL DEFAULT '';
ALTER TABLE runs ADD COLUMN conversation TEXT;

-- One checkpoint per run, taken before the run starts: the worktree's files (a git tree
-- written to the repository's object store), the branch's head and the conversation the
-- run was given. "undo" restores the thread's latest checkpoint and then drops it.
CREATE TABLE run_checkpoints (
    run_id         TEXT PRIMARY KEY,
    channel_id     TEXT NOT NULL,
    thread_ts      TEXT NOT NULL,
    worktree       TEXT NOT NULL,
    tree_sha       TEXT NOT NULL,
    head_sha       TEXT NOT NULL,
    conversation   TEXT NOT NULL,
    created_at     TEXT NOT NULL
);
CREATE INDEX run_checkpoints_by_thread ON run_checkpoints (channel_id, thread_ts, created_at);
