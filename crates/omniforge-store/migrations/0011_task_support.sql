-- OmniForge store schema, version 11: whether a tool version's calls run as tasks (issue 13,
-- MCP Tasks extension SEP-2663): `task_support` (forbidden | optional | required) and
-- `task_start` (call: the task exists before the script starts; script: the script starts it
-- with `omniforge.start_task()`). Part of the immutable definition.
ALTER TABLE tool_version ADD COLUMN task_support TEXT NOT NULL DEFAULT 'forbidden'
    CHECK (task_support IN ('forbidden', 'optional', 'required'));
ALTER TABLE tool_version ADD COLUMN task_start TEXT NOT NULL DEFAULT 'call'
    CHECK (task_start IN ('call', 'script'));

DROP TRIGGER tool_version_immutable;
CREATE TRIGGER tool_version_immutable
BEFORE UPDATE OF tool, number, title, description, input_schema, output_schema, read_only_hint,
    destructive_hint, idempotent_hint, open_world_hint, runtime, code, dependencies, timeout_ms,
    memory_bytes, network, lock, env_id, secrets, author, created_at_ms, examples, task_support,
    task_start
ON tool_version
BEGIN
    SELECT RAISE(ABORT, 'tool versions are immutable');
END;
