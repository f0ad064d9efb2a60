-- Files people share on a message (Slack's `files`): what the message said of each, stored
-- with the message before its event is acknowledged, and what became of it once the
-- thread's task fetched it. The bytes live on disk under `.codebutler/attachments/`; only
-- their metadata is here. Portable SQL (SQLite and PostgreSQL).
--
-- `state`: `pending` (not fetched yet), `stored` (its bytes are in `stored_as`, a name the
-- controller chose), `refused` (not fetched, or fetched and dropped: `note` says why, as the
-- thread was told).
CREATE TABLE message_files (
    channel_id   TEXT NOT NULL,
    message_ts   TEXT NOT NULL,
    position     INTEGER NOT NULL,
    thread_ts    TEXT NOT NULL,
    file_id      TEXT NOT NULL,
    name         TEXT NOT NULL,
    mimetype     TEXT NOT NULL,
    url          TEXT NOT NULL,
    state        TEXT NOT NULL DEFAULT 'pending',
    stored_as    TEXT,
    note         TEXT,
    PRIMARY KEY (channel_id, message_ts, position)
);
