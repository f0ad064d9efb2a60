-- Which repository a person's direct-message conversation with the bot is about, when the
-- service serves several: the row is made when the bot asks (repository NULL) and the
-- person's answer fills it in; `switch to <repository>` changes it. Kept in the first
-- served repository's store. Portable SQL (SQLite and PostgreSQL).
CREATE TABLE conversation_choices (
    channel_id  TEXT PRIMARY KEY,
    repository  TEXT,
    chosen_by   TEXT,
    updated_at  TEXT NOT NULL
);
