-- The reviewer model's reviews (reviewer.model): one row per (thread, head commit of its pull
-- request), so each pushed head is reviewed once, whatever restarts. Portable SQL (SQLite and
-- PostgreSQL).
--
-- state: due (the PR watcher saw the head and told the thread), posting (the review is being
--   posted on GitHub: a restart finding this never posts it again), posted, skipped (a cap or
--   the review's budget), refused (the model's answer could not be read), failed.
-- review_id: the id GitHub gave the posted review; the PR watcher takes the line comments of
--   these reviews into the review loop, and only these of the controller's own comments.
CREATE TABLE reviewer_reviews (
    channel_id TEXT NOT NULL,
    thread_ts TEXT NOT NULL,
    head_oid TEXT NOT NULL,
    pr_number BIGINT NOT NULL,
    pr_url TEXT NOT NULL,
    state TEXT NOT NULL,
    review_id BIGINT,
    created_at TEXT NOT NULL,
    PRIMARY KEY (channel_id, thread_ts, head_oid)
);
