-- The Artist's drawings in a thread: the prompt it proposed, where the image would go, its
-- size, the attachment an edit starts from, its stage, and once drawn the image itself
-- (base64 of the PNG, so "use it" after a restart commits the image that was shown).
-- Portable SQL (SQLite and PostgreSQL).
--
-- `stage`: `proposed` (prompt and price shown), `drawn` (the image posted), `used` (committed
-- to the thread's branch), `cancelled` (cancelled, or replaced by a newer proposal).
CREATE TABLE artist_drawings (
    channel_id  TEXT NOT NULL,
    thread_ts   TEXT NOT NULL,
    number      INTEGER NOT NULL,
    prompt      TEXT NOT NULL,
    path        TEXT NOT NULL,
    size        TEXT NOT NULL,
    base        TEXT,
    stage       TEXT NOT NULL,
    image       TEXT,
    created_at  TEXT NOT NULL,
    PRIMARY KEY (channel_id, thread_ts, number)
);
