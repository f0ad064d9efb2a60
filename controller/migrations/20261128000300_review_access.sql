-- Only people with write access steer the Coder from GitHub (github.reviewFrom). Portable SQL
-- (SQLite and PostgreSQL).

-- heeded: 1 when the comment's author may steer the Coder (write access to the repository,
--   or github.reviewFrom = "anyone"): the comment is sorted and may reach the Coder; 0 when
--   not: the comment is only named in its thread (its author), never sorted, and its text
--   is not kept (body is empty). Comments stored before this column existed were all acted on.
ALTER TABLE review_comments ADD COLUMN heeded BIGINT NOT NULL DEFAULT 1;
