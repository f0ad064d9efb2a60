-- The pull request description is the thread's journal, rewritten at each step of the
-- thread. Portable SQL (SQLite and PostgreSQL).

-- The description last sent to GitHub for each thread (`gh pr edit`): the SHA-256 of its
-- body, so a step whose description did not change sends nothing and a restart neither
-- repeats nor loses an update, and the PM's summary it was written with (JSON; NULL when
-- the PM's answer was unusable), kept for the steps between the pull request's opening and
-- its close, which reuse it rather than ask the model again.
CREATE TABLE pr_descriptions (
    channel_id   TEXT NOT NULL,
    thread_ts    TEXT NOT NULL,
    body_sha256  TEXT NOT NULL,
    summary      TEXT,
    sent_at      TEXT NOT NULL,
    PRIMARY KEY (channel_id, thread_ts)
);

-- When the thread's pull request opened (the journal's "Pull request opened" entry); NULL
-- for pull requests recorded before it was kept.
ALTER TABLE threads ADD COLUMN pr_opened_at TEXT;
