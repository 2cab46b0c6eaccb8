-- OmniForge PostgreSQL schema, version 4: SQLite's migration 0012 (script-backed prompts,
-- issue 13). A script prompt keeps `messages` empty.
ALTER TABLE prompt ADD COLUMN script TEXT CHECK (script IS NULL OR json_typeof(script::json) = 'object');
