-- Who a call was made for, when one person asked for it alone: the person who said "draw it"
-- for an image, the person who sent a voice note for its transcription. Their daily cap
-- (`access.maxCostPerUserPerDay`) counts these rows with the runs they started. Model calls
-- of the PM, the Coder and the other roles have none (NULL): a run's spend is its starter's
-- through `runs`, and the PM's answers count for no one person.
-- Portable SQL (SQLite and PostgreSQL).
ALTER TABLE usage ADD COLUMN person TEXT;
CREATE INDEX usage_by_person ON usage (person, created_at);
