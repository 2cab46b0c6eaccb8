-- OmniForge PostgreSQL schema, version 3: SQLite's migration 0011 (`task_support` and
-- `task_start` of a tool version, issue 13). Part of the immutable definition.
ALTER TABLE tool_version ADD COLUMN task_support TEXT NOT NULL DEFAULT 'forbidden'
    CHECK (task_support IN ('forbidden', 'optional', 'required'));
ALTER TABLE tool_version ADD COLUMN task_start TEXT NOT NULL DEFAULT 'call'
    CHECK (task_start IN ('call', 'script'));

DROP TRIGGER tool_version_immutable ON tool_version;
CREATE TRIGGER tool_version_immutable
BEFORE UPDATE OF tool, number, title, description, input_schema, output_schema, read_only_hint,
    destructive_hint, idempotent_hint, open_world_hint, runtime, code, dependencies, timeout_ms,
    memory_bytes, network, lock, env_id, secrets, author, created_at_ms, examples, task_support,
    task_start
ON tool_version
FOR EACH ROW EXECUTE FUNCTION tool_version_immutable();
