-- OmniForge store schema, version 10: durable tasks (issue 13, MCP Tasks extension SEP-2663).
-- One row per task: who owns it, which tool call it runs, its status and, once terminal, the
-- call's result or the error that ended it; the replica that runs it holds a lease it renews by
-- heartbeat, so that a task whose replica died is failed by any other replica's sweep.
-- Every change of status or of pending input is a change of the feed (kind `task`, key the
-- task id), so that the running replica hears `tasks/cancel` and `tasks/update` at once.
CREATE TABLE task (
    task_id             TEXT PRIMARY KEY NOT NULL
                        CHECK (length(task_id) BETWEEN 1 AND 128
                               AND task_id NOT GLOB '*[^a-zA-Z0-9_.:-]*'),
    owner               TEXT NOT NULL CHECK (length(owner) BETWEEN 1 AND 512),
    source              TEXT NOT NULL CHECK (source IN ('stored', 'manifest')),
    tool                TEXT NOT NULL CHECK (length(tool) BETWEEN 1 AND 256),
    version             INTEGER CHECK (version >= 1),
    status              TEXT NOT NULL
                        CHECK (status IN ('working', 'input_required', 'completed', 'failed',
                                          'cancelled')),
    status_message      TEXT CHECK (length(CAST(status_message AS BLOB)) <= 4096),
    created_at_ms       INTEGER NOT NULL,
    updated_at_ms       INTEGER NOT NULL,
    -- NULL: kept until purged by hand (the server always sets one).
    ttl_ms              INTEGER CHECK (ttl_ms > 0),
    expires_at_ms       INTEGER,
    poll_interval_ms    INTEGER NOT NULL CHECK (poll_interval_ms > 0),
    -- The CallToolResult (JSON object) of a completed task.
    result              TEXT CHECK (json_type(result) = 'object'),
    -- {code, message, data?} of a failed task.
    error               TEXT CHECK (json_type(error) = 'object'),
    -- The pending input requests ({key: {method, params}}) of an input_required task.
    input_requests      TEXT CHECK (json_type(input_requests) = 'object'),
    -- Answers delivered by tasks/update and not yet taken by the running replica.
    input_responses     TEXT NOT NULL DEFAULT '{}' CHECK (json_type(input_responses) = 'object'),
    replica             TEXT NOT NULL CHECK (length(replica) BETWEEN 1 AND 256),
    lease_expires_at_ms INTEGER NOT NULL,
    CHECK ((source = 'stored') = (version IS NOT NULL)),
    CHECK ((ttl_ms IS NULL) = (expires_at_ms IS NULL)),
    CHECK ((status = 'completed') = (result IS NOT NULL)),
    CHECK ((status = 'failed') = (error IS NOT NULL)),
    CHECK ((status = 'input_required') = (input_requests IS NOT NULL))
) STRICT;
CREATE INDEX task_by_replica ON task (replica, status);
CREATE INDEX task_by_lease ON task (lease_expires_at_ms);
CREATE INDEX task_by_expiry ON task (expires_at_ms);

-- The change feed's kinds gain `task` (key: the task id). Both tables are rebuilt for their
-- CHECK; the task floor starts at the current counter, as migration 7 started `grant`.
CREATE TABLE changes_new (
    seq   INTEGER PRIMARY KEY NOT NULL,
    kind  TEXT NOT NULL
          CHECK (kind IN ('tool', 'resource', 'resource_template', 'prompt', 'secret', 'grant',
                          'task')),
    key   TEXT NOT NULL,
    at_ms INTEGER NOT NULL
) STRICT;
INSERT INTO changes_new (seq, kind, key, at_ms) SELECT seq, kind, key, at_ms FROM changes;
DROP TABLE changes;
ALTER TABLE changes_new RENAME TO changes;

CREATE TABLE change_floor_new (
    kind TEXT PRIMARY KEY NOT NULL
         CHECK (kind IN ('tool', 'resource', 'resource_template', 'prompt', 'secret', 'grant',
                         'task')),
    seq  INTEGER NOT NULL
) STRICT;
INSERT INTO change_floor_new (kind, seq) SELECT kind, seq FROM change_floor;
DROP TABLE change_floor;
ALTER TABLE change_floor_new RENAME TO change_floor;
INSERT INTO change_floor (kind, seq) SELECT 'task', value FROM meta WHERE key = 'data_version';
