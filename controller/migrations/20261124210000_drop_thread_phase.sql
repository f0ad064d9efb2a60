-- threads.phase ('pm' or 'coder') said what threads.state says since the thread-state
-- migration filled state from it; state is the one record of a thread's stage now.
-- Portable SQL (SQLite 3.35+ and PostgreSQL).
ALTER TABLE threads DROP COLUMN phase;
