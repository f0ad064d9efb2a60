-- A conversation whose repository is chosen is a person's whole direct-message conversation
-- (thread_ts empty, as before) or one thread a mention started in a channel no repository is
-- served in (its thread_ts): the key becomes (channel_id, thread_ts). The table is rebuilt
-- (SQLite cannot change a primary key in place); the choices made so far are kept as the
-- direct-message conversations they were. Portable SQL (SQLite and PostgreSQL).
CREATE TABLE conversation_choices_by_thread (
    channel_id  TEXT NOT NULL,
    thread_ts   TEXT NOT NULL DEFAULT '',
    repository  TEXT,
    chosen_by   TEXT,
    updated_at  TEXT NOT NULL,
    PRIMARY KEY (channel_id, thread_ts)
);
INSERT INTO conversation_choices_by_thread (channel_id, thread_ts, repository, chosen_by, updated_at)
    SELECT channel_id, '', repository, chosen_by, updated_at FROM conversation_choices;
DROP TABLE conversation_choices;
ALTER TABLE conversation_choices_by_thread RENAME TO conversation_choices;
