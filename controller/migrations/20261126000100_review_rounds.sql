-- The pull request review loop. Portable SQL (SQLite and PostgreSQL).

-- Comments people left on a thread's pull request, as the PR watcher first saw them (bots
-- listed in github.ignoreBots and the controller's own comments are never stored).
-- comment_key: `line:<id>` (a line comment), `review:<id>` (a review's body) or
--   `conversation:<id>` (a comment on the pull request's conversation).
-- reply_to: for a line comment, the top comment of its thread (GitHub takes replies to that
--   one only); NULL when it is the top comment itself.
-- seen_ms: when the watcher first saw it (the quiet period counts from the newest).
-- round: the round that took it (NULL while it waits for its batch).
-- sorted: what the PM made of it: `change`, `question` or `discussion` (NULL: not sorted).
-- reply: the reply on GitHub: NULL (none due or not yet tried), `attempted` (being posted:
--   a crash then looks for it among the pull request's comments before posting again),
--   `posted`.
CREATE TABLE review_comments (
    channel_id   TEXT NOT NULL,
    thread_ts    TEXT NOT NULL,
    comment_key  TEXT NOT NULL,
    pr_number    BIGINT NOT NULL,
    author       TEXT NOT NULL,
    path         TEXT,
    line         BIGINT,
    body         TEXT NOT NULL,
    url          TEXT NOT NULL,
    reply_to     BIGINT,
    seen_ms      BIGINT NOT NULL,
    round        BIGINT,
    sorted       TEXT,
    reply        TEXT,
    PRIMARY KEY (channel_id, thread_ts, comment_key)
);

-- The rounds the PR watcher opened: a batch of review comments or the failing checks of a
-- head commit, each announced once in its thread by a stored watcher message.
-- kind: `review` or `checks`.
-- head_oid: the pull request's head commit when the round opened.
-- state: `new` (announced, not yet handled by the thread), `proposed` (waits for yes/no),
--   `nothing` (no change or question to propose), `unsorted` (the PM's answer could not be
--   read: reported without a proposal), `approved` (the Coder's follow-up run took it),
--   `declined`, `done` (after the run: replies posted where due).
-- approved_at: when it was approved (the follow-up run is the thread's first after it).
CREATE TABLE review_rounds (
    channel_id   TEXT NOT NULL,
    thread_ts    TEXT NOT NULL,
    round        BIGINT NOT NULL,
    pr_number    BIGINT NOT NULL,
    pr_url       TEXT NOT NULL,
    kind         TEXT NOT NULL,
    head_oid     TEXT NOT NULL,
    decision     TEXT NOT NULL,
    state        TEXT NOT NULL,
    approved_at  TEXT,
    created_at   TEXT NOT NULL,
    PRIMARY KEY (channel_id, thread_ts, round)
);

-- Checks that failed on a pull request's head commit: each (check, head commit) once.
-- round: the round that reported it (NULL: seen after the round cap, never reported).
-- log_tail: the end of `gh run view <id> --log-failed` (or why there is none).
CREATE TABLE check_failures (
    channel_id   TEXT NOT NULL,
    thread_ts    TEXT NOT NULL,
    check_name   TEXT NOT NULL,
    head_oid     TEXT NOT NULL,
    round        BIGINT,
    log_tail     TEXT NOT NULL,
    PRIMARY KEY (channel_id, thread_ts, check_name, head_oid)
);
