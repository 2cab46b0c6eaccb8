-- OmniForge store schema, version 12: script-backed prompts (issue 13). A prompt either has
-- stored `messages` with {argument} placeholders, or a `script` (the same JSON object as a
-- template's: code, dependencies, lock, env_id, timeout_ms, memory_bytes, network) that gets
-- the arguments on stdin and prints the messages; a script prompt keeps `messages` empty.
ALTER TABLE prompt ADD COLUMN script TEXT CHECK (script IS NULL OR json_type(script) = 'object');
