-- The people who opened CodeButler's Home tab: their Home is published again when one of
-- their threads changes (people who never opened it get none). Kept in the first served
-- repository's store. Portable SQL (SQLite and PostgreSQL).
CREATE TABLE home_viewers (
    user_id    TEXT PRIMARY KEY,
    opened_at  TEXT NOT NULL
);
