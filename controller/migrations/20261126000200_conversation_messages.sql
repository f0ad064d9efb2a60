-- A Coder run's conversation, stored append-only. Portable SQL (SQLite 3.35+ and PostgreSQL).
--
-- Until now every Coder model call rewrote the run's whole conversation in
-- runs.conversation, so a session wrote the square of its length. Now each model call
-- appends one row with the messages it added: `messages` is a JSON array of chat messages
-- (without the system prompt) that follow the conversation's first `first_index` messages.
-- A row with `first_index` 0 starts the conversation over (the run's first call, a seed,
-- an undo); a compaction is a row whose `first_index` keeps only the head the compacted
-- conversation shares with the stored one. The conversation is read back by starting at
-- the run's latest row with `first_index` 0 and applying the rows after it in `seq` order.
CREATE TABLE run_conversation (
    run_id       TEXT NOT NULL,
    seq          BIGINT NOT NULL,
    first_index  BIGINT NOT NULL,
    messages     TEXT NOT NULL,
    PRIMARY KEY (run_id, seq)
);

-- Conversations stored the old way become each run's first row.
INSERT INTO run_conversation (run_id, seq, first_index, messages)
    SELECT id, 1, 0, conversation FROM runs WHERE conversation IS NOT NULL;

ALTER TABLE runs DROP COLUMN conversation;
