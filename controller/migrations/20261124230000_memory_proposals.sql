-- Memory proposals people approve in their thread. Portable SQL (SQLite and PostgreSQL).

-- One row per proposal; a thread has at most one open at a time.
-- target: 'pr_branch' (committed to the thread's pull request branch) or 'new_pr' (a small
--   pull request of its own, for a thread without one).
-- items: the proposed operations, a JSON array (`append` / `replace`), as edited so far.
-- state: 'open' (waiting for yes, no or an edit), 'saved' (committed), 'discarded' (no).
-- revision: how many edits it had; an edit is recorded only against the revision it read.
-- post_id: the outbox id of its latest post in the thread.
-- commit_sha: the commit that saved it.
CREATE TABLE memory_proposals (
    channel_id  TEXT NOT NULL,
    thread_ts   TEXT NOT NULL,
    seq         BIGINT NOT NULL,
    target      TEXT NOT NULL,
    items       TEXT NOT NULL,
    state       TEXT NOT NULL,
    revision    BIGINT NOT NULL DEFAULT 0,
    post_id     TEXT,
    commit_sha  TEXT,
    created_at  TEXT NOT NULL,
    updated_at  TEXT NOT NULL,
    PRIMARY KEY (channel_id, thread_ts, seq)
);
CREATE UNIQUE INDEX memory_proposals_open ON memory_proposals (channel_id, thread_ts)
    WHERE state = 'open';
