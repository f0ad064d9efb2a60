-- The thread's lifecycle: created → planning → working → pr_opened → closed (merged |
-- abandoned), and the pull request it opened. Portable SQL (SQLite and PostgreSQL).

-- state gains 'created' (stored, none of its messages handled yet), 'pr_opened' (the Coder
-- opened the thread's pull request), 'closed_merged' and 'closed_abandoned'.
-- pr_number, pr_url: the thread's pull request, once opened.
ALTER TABLE threads ADD COLUMN pr_number BIGINT;
ALTER TABLE threads ADD COLUMN pr_url TEXT;

-- Threads stored before: a conversing thread none of whose messages was handled yet is
-- created. The pull requests of earlier threads were never stored, so they stay 'approved'.
UPDATE threads SET state = 'created'
WHERE state = 'conversing'
  AND NOT EXISTS (
    SELECT 1 FROM messages
    WHERE messages.channel_id = threads.channel_id
      AND messages.thread_ts = threads.thread_ts
      AND messages.state = 'processed'
  );
