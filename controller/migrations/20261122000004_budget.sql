-- Per-thread Coder budgets. Portable SQL (SQLite and PostgreSQL).

-- A thread's cap on what its Coder may spend, in USD (0: no cap). A row appears when someone
-- types "budget $N" in the thread, or when a plan is approved (then with coder.maxCostPerThread
-- unless a budget was typed before). The hub refuses the thread's Coder model calls once the
-- Coder's recorded cost in the thread reaches the cap; without a row there is no cap (runs
-- started with runnerctl).
CREATE TABLE thread_budgets (
    channel_id  TEXT NOT NULL,
    thread_ts   TEXT NOT NULL,
    cap_usd     DOUBLE PRECISION NOT NULL,
    set_by      TEXT NOT NULL,
    updated_at  TEXT NOT NULL,
    PRIMARY KEY (channel_id, thread_ts)
);
