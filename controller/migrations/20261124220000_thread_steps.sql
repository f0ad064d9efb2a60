-- Steps a thread does once, whatever crashes in between: the steps after its pull request
-- opened (TODO scan, PR description, memory proposal) and those of its close. A step is
-- recorded in the same transaction as what it says in Slack, so it is said once and never
-- redone. Portable SQL (SQLite and PostgreSQL).
CREATE TABLE thread_steps (
    channel_id  TEXT NOT NULL,
    thread_ts   TEXT NOT NULL,
    step        TEXT NOT NULL,
    done_at     TEXT NOT NULL,
    PRIMARY KEY (channel_id, thread_ts, step)
);
