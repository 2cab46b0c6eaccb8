-- OmniForge store schema, version 5: version status (issue 17: the approval gate and drafts),
-- examples, and the last result of each example.
--
-- Like every migration, this runs with foreign key enforcement off and the foreign keys checked
-- before commit (sqlite/migrate.rs), so that `tool` can be rebuilt without cascading deletes.

-- `tool.current_version` becomes nullable: a new tool whose first version is pending approval
-- (or a draft) has no current version. SQLite cannot drop NOT NULL in place; rebuild the table.
CREATE TABLE tool_new (
    name            TEXT PRIMARY KEY NOT NULL
                    CHECK (length(name) BETWEEN 1 AND 64 AND name NOT GLOB '*[^a-zA-Z0-9_-]*'),
    enabled         INTEGER NOT NULL CHECK (enabled IN (0, 1)),
    -- Always a live version (trigger below); NULL while the tool has none.
    current_version INTEGER,
    created_at_ms   INTEGER NOT NULL,
    updated_at_ms   INTEGER NOT NULL,
    updated_seq     INTEGER NOT NULL,
    FOREIGN KEY (name, current_version) REFERENCES tool_version (tool, number)
        DEFERRABLE INITIALLY DEFERRED
) STRICT;

INSERT INTO tool_new (name, enabled, current_version, created_at_ms, updated_at_ms, updated_seq)
SELECT name, enabled, current_version, created_at_ms, updated_at_ms, updated_seq FROM tool;
DROP TABLE tool;
ALTER TABLE tool_new RENAME TO tool;
CREATE INDEX tool_by_update ON tool (enabled, updated_seq DESC);

-- Every existing version went live when it was written.
ALTER TABLE tool_version ADD COLUMN status TEXT NOT NULL DEFAULT 'live'
    CHECK (status IN ('live', 'pending', 'draft', 'rejected'));
-- A draft's failure, a rejection's reason, or 'superseded by version N'.
ALTER TABLE tool_version ADD COLUMN status_reason TEXT;
-- Who approved or rejected it, and when; set together by every status change.
ALTER TABLE tool_version ADD COLUMN status_by TEXT;
ALTER TABLE tool_version ADD COLUMN status_at_ms INTEGER;
-- JSON array of example calls (objects), part of the immutable definition.
ALTER TABLE tool_version ADD COLUMN examples TEXT NOT NULL DEFAULT '[]'
    CHECK (json_type(examples) = 'array');

CREATE INDEX tool_version_by_status ON tool_version (status, author);

-- Versions stay immutable except their status columns.
DROP TRIGGER tool_version_immutable;
CREATE TRIGGER tool_version_immutable
BEFORE UPDATE OF tool, number, title, description, input_schema, output_schema, read_only_hint,
    destructive_hint, idempotent_hint, open_world_hint, runtime, code, dependencies, timeout_ms,
    memory_bytes, network, lock, env_id, secrets, author, created_at_ms, examples
ON tool_version
BEGIN
    SELECT RAISE(ABORT, 'tool versions are immutable');
END;

-- The status changes only along pending -> live | rejected and draft -> rejected, and every
-- change says who made it and when.
CREATE TRIGGER tool_version_status
BEFORE UPDATE OF status, status_reason, status_by, status_at_ms ON tool_version
WHEN NOT (
    ((OLD.status = 'pending' AND NEW.status IN ('live', 'rejected'))
        OR (OLD.status = 'draft' AND NEW.status = 'rejected'))
    AND NEW.status_by IS NOT NULL AND NEW.status_at_ms IS NOT NULL
)
BEGIN
    SELECT RAISE(ABORT, 'a tool version''s status only goes pending -> live | rejected or draft -> rejected');
END;

-- The current version is always a live one. A tool is inserted without one and then pointed at
-- its first version once that exists.
CREATE TRIGGER tool_current_is_live
BEFORE UPDATE OF current_version ON tool
WHEN NEW.current_version IS NOT NULL AND NOT EXISTS (
    SELECT 1 FROM tool_version
    WHERE tool = NEW.name AND number = NEW.current_version AND status = 'live'
)
BEGIN
    SELECT RAISE(ABORT, 'a tool''s current version must be a live version');
END;

CREATE TRIGGER tool_inserted_without_current
BEFORE INSERT ON tool
WHEN NEW.current_version IS NOT NULL
BEGIN
    SELECT RAISE(ABORT, 'a tool is inserted without a current version');
END;

-- The last result of each example of a version; replaced whole at every run of the examples.
CREATE TABLE example_result (
    tool        TEXT NOT NULL,
    version     INTEGER NOT NULL,
    -- The example's index in the version's `examples`.
    idx         INTEGER NOT NULL CHECK (idx >= 0),
    passed      INTEGER NOT NULL CHECK (passed IN (0, 1)),
    -- The result text (cut to 2 KiB) and, for a failed example, what did not match.
    actual      TEXT NOT NULL,
    failure     TEXT,
    run_trigger TEXT NOT NULL CHECK (run_trigger IN ('create', 'update', 'check', 'rollback', 'import')),
    ran_by      TEXT NOT NULL,
    ran_at_ms   INTEGER NOT NULL,
    PRIMARY KEY (tool, version, idx),
    FOREIGN KEY (tool, version) REFERENCES tool_version (tool, number) ON DELETE CASCADE
) STRICT;
