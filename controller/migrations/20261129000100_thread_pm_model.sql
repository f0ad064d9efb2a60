-- The PM model a person chose for one thread with `/codebutler pm <model>`: an OpenRouter id
-- from the PM's pool, with who chose it. NULL: the thread's PM uses the configured default.
-- Portable SQL (SQLite and PostgreSQL).
ALTER TABLE threads ADD COLUMN pm_model TEXT;
ALTER TABLE threads ADD COLUMN pm_model_set_by TEXT;
