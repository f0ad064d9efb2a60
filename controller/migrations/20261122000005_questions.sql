-- Questions a Coder asked while it worked, and who answered them. Portable SQL (SQLite and
-- PostgreSQL).

-- One row per AskUser call that reached the controller. state: 'asked' (the PM is being
-- consulted), 'escalated' (posted in the thread, waiting for a person), 'answered'.
-- answered_by: 'pm', or the Slack user id of the person whose reply was the answer.
-- pm_note: why the PM passed the question on, when it did.
CREATE TABLE coder_questions (
    run_id       TEXT NOT NULL,
    question_id  TEXT NOT NULL,
    channel_id   TEXT NOT NULL,
    thread_ts    TEXT NOT NULL,
    question     TEXT NOT NULL,
    state        TEXT NOT NULL,
    pm_note      TEXT,
    answer       TEXT,
    answered_by  TEXT,
    asked_at     TEXT NOT NULL,
    answered_at  TEXT,
    PRIMARY KEY (run_id, question_id)
);
CREATE INDEX coder_questions_by_thread ON coder_questions (channel_id, thread_ts, asked_at);
