-- A thread's stage, stored explicitly. Portable SQL (SQLite and PostgreSQL).

-- state: 'conversing' (with the PM, no plan waiting), 'plan_pending' (the PM's plan waits
-- for approval), 'approved' (the plan was handed to the Coder; whether its run is being
-- prepared, running or has ended is read from `runs`). Threads stored before this column
-- existed get theirs from `phase` and `plan`, which said the same.
ALTER TABLE threads ADD COLUMN state TEXT NOT NULL DEFAULT 'conversing';
UPDATE threads SET state = 'plan_pending' WHERE phase = 'pm' AND plan IS NOT NULL;
UPDATE threads SET state = 'approved' WHERE phase = 'coder';
