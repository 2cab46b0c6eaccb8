-- OmniForge store schema, version 1.
--
-- Times are unix milliseconds (UTC). Booleans are 0/1. JSON columns hold compact JSON text.
-- Tables are STRICT so a value of the wrong type is an error, not a silent conversion.

-- One row per counter. `data_version` is bumped by every write transaction that changes tools,
-- versions or secrets (not by call log writes); readers in other processes poll it.
CREATE TABLE meta (
    key   TEXT PRIMARY KEY NOT NULL,
    value INTEGER NOT NULL
) STRICT;

INSERT INTO meta (key, value) VALUES ('data_version', 0);

CREATE TABLE tool (
    name            TEXT PRIMARY KEY NOT NULL
                    CHECK (length(name) BETWEEN 1 AND 64 AND name NOT GLOB '*[^a-zA-Z0-9_-]*'),
    enabled         INTEGER NOT NULL CHECK (enabled IN (0, 1)),
    current_version INTEGER NOT NULL,
    created_at_ms   INTEGER NOT NULL,
    updated_at_ms   INTEGER NOT NULL,
    -- The `data_version` value of the transaction that last changed this row: orders
    -- `list_enabled` exactly, even when two updates share a millisecond or clocks step back.
    updated_seq     INTEGER NOT NULL,
    -- Deferred: a tool and its first version are inserted in one transaction, tool first.
    FOREIGN KEY (name, current_version) REFERENCES tool_version (tool, number)
        DEFERRABLE INITIALLY DEFERRED
) STRICT;

CREATE INDEX tool_by_update ON tool (enabled, updated_seq DESC);

CREATE TABLE tool_version (
    tool             TEXT NOT NULL REFERENCES tool (name) ON DELETE CASCADE,
    number           INTEGER NOT NULL CHECK (number >= 1),
    title            TEXT,
    description      TEXT NOT NULL,
    input_schema     TEXT NOT NULL CHECK (json_type(input_schema) = 'object'),
    output_schema    TEXT CHECK (output_schema IS NULL OR json_type(output_schema) = 'object'),
    read_only_hint   INTEGER CHECK (read_only_hint IN (0, 1)),
    destructive_hint INTEGER CHECK (destructive_hint IN (0, 1)),
    idempotent_hint  INTEGER CHECK (idempotent_hint IN (0, 1)),
    open_world_hint  INTEGER CHECK (open_world_hint IN (0, 1)),
    runtime          TEXT NOT NULL CHECK (runtime IN ('python')),
    code             TEXT NOT NULL,
    -- JSON array of PEP 508 requirement strings.
    dependencies     TEXT NOT NULL CHECK (json_type(dependencies) = 'array'),
    timeout_ms       INTEGER NOT NULL CHECK (timeout_ms >= 0),
    memory_bytes     INTEGER NOT NULL CHECK (memory_bytes >= 0),
    network          INTEGER NOT NULL CHECK (network IN (0, 1)),
    -- The resolved, hash-pinned requirements text.
    lock             TEXT NOT NULL,
    env_id           TEXT NOT NULL,
    -- JSON array of secret names.
    secrets          TEXT NOT NULL CHECK (json_type(secrets) = 'array'),
    author           TEXT NOT NULL,
    created_at_ms    INTEGER NOT NULL,
    PRIMARY KEY (tool, number)
) STRICT;

-- Versions are immutable: once written, a row changes only by being deleted with its tool.
CREATE TRIGGER tool_version_immutable BEFORE UPDATE ON tool_version
BEGIN
    SELECT RAISE(ABORT, 'tool versions are immutable');
END;

CREATE TABLE call_log (
    id            INTEGER PRIMARY KEY,
    tool          TEXT NOT NULL,
    version       INTEGER NOT NULL,
    started_at_ms INTEGER NOT NULL,
    duration_ms   INTEGER NOT NULL CHECK (duration_ms >= 0),
    outcome       TEXT NOT NULL CHECK (outcome IN ('ok', 'error', 'exit', 'timeout', 'cancelled')),
    -- Set exactly when outcome = 'exit'.
    exit_code     INTEGER CHECK ((outcome = 'exit') = (exit_code IS NOT NULL)),
    bytes_out     INTEGER NOT NULL CHECK (bytes_out >= 0),
    FOREIGN KEY (tool, version) REFERENCES tool_version (tool, number) ON DELETE CASCADE
) STRICT;

CREATE INDEX call_log_by_tool ON call_log (tool, id DESC);

CREATE TABLE secret (
    name          TEXT PRIMARY KEY NOT NULL
                  CHECK (length(name) BETWEEN 1 AND 64 AND name NOT GLOB '*[^a-zA-Z0-9_]*'
                         AND substr(name, 1, 1) NOT GLOB '[0-9]'),
    value         TEXT NOT NULL,
    updated_at_ms INTEGER NOT NULL
) STRICT;
