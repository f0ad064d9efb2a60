-- Who stored each thread message: 'person' (a Slack message event), 'click' (a button
-- click), 'watcher' (the PR watcher) or 'notice' (a coordination notice). Portable SQL
-- (SQLite 3.35+ and PostgreSQL).
--
-- Until now a stored message's text said what it was: a message reading like the PR
-- watcher's marker closed its thread, whoever typed it. The origin is set by the code that
-- stores the message, never read from its text.
ALTER TABLE messages ADD COLUMN origin TEXT NOT NULL DEFAULT 'person';

-- Rows stored before: the watcher and the notices had users of their own that no Slack
-- user id can be, and clicks an event id of their own (`click:<trigger id>`).
UPDATE messages SET origin = 'watcher' WHERE user_id = 'codebutler:pr-watcher';
UPDATE messages SET origin = 'notice' WHERE user_id = 'codebutler:coordination';
UPDATE messages SET origin = 'click' WHERE event_id LIKE 'click:%';
