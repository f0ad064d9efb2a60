-- The first schema. Portable SQL: it runs on SQLite (the embedded default) and PostgreSQL.
-- Times are RFC 3339 text; Slack timestamps ("1700000000.000100") are text keys.

CREATE TABLE threads (
    channel_id  TEXT NOT NULL,
    thread_ts   TEXT NOT NULL,
    phase       TEXT NOT NULL DEFAULT 'pm',
    plan        TEXT,
    created_at  TEXT NOT NULL,
    updated_at  TEXT NOT NULL,
    PRIMARY KEY (channel_id, thread_ts)
);

-- Every user message, stored before Slack's event is acknowledged.
-- state: 'pending' (not yet answered), 'failed' (the model could not be reached; retried
-- on the thread's next message or the next start), 'processed'.
CREATE TABLE messages (
    channel_id    TEXT NOT NULL,
    ts            TEXT NOT NULL,
    thread_ts     TEXT NOT NULL,
    user_id       TEXT NOT NULL,
    text          TEXT NOT NULL,
    event_id      TEXT,
    received_at   TEXT NOT NULL,
    state         TEXT NOT NULL DEFAULT 'pending',
    attempts      INTEGER NOT NULL DEFAULT 0,
    processed_at  TEXT,
    PRIMARY KEY (channel_id, ts)
);
CREATE INDEX messages_by_state ON messages (state, channel_id, thread_ts, ts);

-- Per-thread, per-role conversations, one row per chat message (JSON in the chat
-- completions shape), appended in order.
CREATE TABLE conversation_messages (
    channel_id  TEXT NOT NULL,
    thread_ts   TEXT NOT NULL,
    role        TEXT NOT NULL,
    seq         BIGINT NOT NULL,
    body        TEXT NOT NULL,
    created_at  TEXT NOT NULL,
    PRIMARY KEY (channel_id, thread_ts, role, seq)
);

-- One row per model call.
CREATE TABLE usage (
    id                 TEXT PRIMARY KEY,
    channel_id         TEXT NOT NULL,
    thread_ts          TEXT NOT NULL,
    role               TEXT NOT NULL,
    model              TEXT NOT NULL,
    prompt_tokens      BIGINT NOT NULL,
    completion_tokens  BIGINT NOT NULL,
    cached_tokens      BIGINT NOT NULL,
    cost               DOUBLE PRECISION,
    created_at         TEXT NOT NULL
);
CREATE INDEX usage_by_thread ON usage (channel_id, thread_ts);
