-- Exactly once in Slack, across crashes. Portable SQL (SQLite and PostgreSQL).

-- The outbox: one row per effect the daemon means to have in Slack (a message to post, a
-- snippet to upload, a reaction to add, a message to update), written in the same transaction
-- as the change it reports, then delivered in `seq` order per thread. A posted message
-- carries the row's id in its metadata, an uploaded snippet is known by its file id, so after
-- a crash the thread shows whether an attempt got through.
-- id: '<group>/<n>', n the effect's place in the group written together.
-- state: 'pending' (not done, and known not to be), 'sending' (attempted, outcome unknown
-- until delivered or found in the thread), 'sent', 'failed' (refused by Slack; given up).
CREATE TABLE outbox (
    id          TEXT PRIMARY KEY,
    seq         BIGINT NOT NULL,
    channel_id  TEXT NOT NULL,
    thread_ts   TEXT NOT NULL,
    body        TEXT NOT NULL,
    state       TEXT NOT NULL DEFAULT 'pending',
    ts          TEXT,
    file_id     TEXT,
    error       TEXT,
    created_at  TEXT NOT NULL,
    sent_at     TEXT
);
CREATE UNIQUE INDEX outbox_by_seq ON outbox (seq);
CREATE INDEX outbox_unsent ON outbox (state, channel_id, thread_ts, seq);

-- A message that began a Coder run ('approval' or 'follow_up') and when. One still pending
-- at start with this set was cut off by a crash while its run was being started.
ALTER TABLE messages ADD COLUMN run_start TEXT;
ALTER TABLE messages ADD COLUMN run_start_at TEXT;

-- When a run's end (its summary, or that it was cut off) was written to the outbox. Runs
-- that ended before this column existed were reported then.
ALTER TABLE runs ADD COLUMN reported_at TEXT;
UPDATE runs SET reported_at = COALESCE(ended_at, created_at)
    WHERE state NOT IN ('queued', 'running');
