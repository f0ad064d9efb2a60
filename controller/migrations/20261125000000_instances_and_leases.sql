-- Several instances of the service sharing one store (PostgreSQL; with SQLite there is one),
-- and which instance handles which thread. Portable SQL (SQLite and PostgreSQL).
-- Times here are milliseconds since the epoch read from the database's clock, never a host's,
-- so hosts whose clocks disagree still agree on who holds what.

-- One row per instance: id '<host>:<pid>:<start ms>', renewed by its heartbeat.
CREATE TABLE instances (
    id            TEXT PRIMARY KEY,
    host          TEXT NOT NULL,
    pid           BIGINT NOT NULL,
    started_at    BIGINT NOT NULL,
    heartbeat_at  BIGINT NOT NULL
);

-- The instance that handles a thread's messages, until expires_at. A lease whose owner stops
-- renewing it expires and can be claimed by another instance.
CREATE TABLE thread_leases (
    channel_id  TEXT NOT NULL,
    thread_ts   TEXT NOT NULL,
    owner       TEXT NOT NULL,
    expires_at  BIGINT NOT NULL,
    PRIMARY KEY (channel_id, thread_ts)
);
CREATE INDEX thread_leases_by_owner ON thread_leases (owner);

-- The instance a Coder run was admitted on (it runs there, in that host's worktree), when it
-- was admitted to one of the access.maxConcurrentThreads slots every instance shares. A run
-- counts against the slots from admission until it ends, while its instance is alive.
ALTER TABLE runs ADD COLUMN instance TEXT;
