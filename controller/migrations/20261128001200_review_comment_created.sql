-- A review comment's creation time as GitHub gives it, so a round's comments read back oldest
-- first however the PR watcher's polls fell. Portable SQL (SQLite and PostgreSQL).

-- created_ms: GitHub's created_at (a line comment), createdAt (a conversation comment) or
--   submittedAt (a review), in milliseconds since the epoch; NULL when GitHub gave none that
--   reads as a time, and for comments stored before this column existed (those sort after the
--   dated ones, by when they were first seen).
ALTER TABLE review_comments ADD COLUMN created_ms BIGINT;
