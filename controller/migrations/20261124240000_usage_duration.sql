-- How long each model call took (ms, from the request to the answer, retries included), for
-- the usage report's wall time per role. Calls recorded before have none (NULL).
-- Portable SQL (SQLite and PostgreSQL).
ALTER TABLE usage ADD COLUMN duration_ms BIGINT;
