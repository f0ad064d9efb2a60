-- Coordination between threads: what each thread's branch changes, the notices given about
-- overlaps, conflicts and merges (each once), and the channel's merge-order message.
-- The plan's predicted files, the branch, the pull request and the state are already kept
-- (threads.plan, runs.branch, threads.pr_number, threads.state). Portable SQL (SQLite and
-- PostgreSQL).

-- The files a thread's branch changes against its base, read with git after each Coder run.
-- head: the branch's commit they were read at; files: a JSON array of
-- {"path", "added", "removed"}, sorted by path.
CREATE TABLE thread_scope (
    channel_id  TEXT NOT NULL,
    thread_ts   TEXT NOT NULL,
    head        TEXT NOT NULL,
    files       TEXT NOT NULL,
    updated_at  TEXT NOT NULL,
    PRIMARY KEY (channel_id, thread_ts)
);

-- A notice given in a thread, recorded with what it says so it is never given twice
-- (an overlap with another thread, a conflict at two head commits, a merge of another PR).
CREATE TABLE coordination_notices (
    channel_id  TEXT NOT NULL,
    thread_ts   TEXT NOT NULL,
    notice      TEXT NOT NULL,
    given_at    TEXT NOT NULL,
    PRIMARY KEY (channel_id, thread_ts, notice)
);

-- The channel's merge-order recommendation: the outbox id of its post and the digest of
-- what it says now, so it is updated only when what it says changes.
CREATE TABLE merge_order (
    channel_id  TEXT PRIMARY KEY,
    post_id     TEXT NOT NULL,
    digest      TEXT NOT NULL,
    updated_at  TEXT NOT NULL
);
