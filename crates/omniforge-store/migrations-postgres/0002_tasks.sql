-- OmniForge PostgreSQL schema, version 2: durable tasks (issue 13), the same as SQLite's
-- migration 0010. One row per task: owner, the tool call it runs, its status and, once
-- terminal, the call's result or the error that ended it; the replica that runs it holds a
-- lease it renews by heartbeat, so that a task whose replica died is failed by any other
-- replica's sweep. Every change of status or of pending input is a change of the feed (kind
-- `task`, key the task id): the running replica hears tasks/cancel and tasks/update through
-- NOTIFY.
CREATE TABLE task (
    task_id             TEXT COLLATE "C" PRIMARY KEY CHECK (task_id ~ '^[a-zA-Z0-9_.:-]{1,128}$'),
    owner               TEXT NOT NULL CHECK (octet_length(owner) BETWEEN 1 AND 512),
    source              TEXT NOT NULL CHECK (source IN ('stored', 'manifest')),
    tool                TEXT NOT NULL CHECK (octet_length(tool) BETWEEN 1 AND 256),
    version             BIGINT CHECK (version >= 1),
    status              TEXT NOT NULL
                        CHECK (status IN ('working', 'input_required', 'completed', 'failed',
                                          'cancelled')),
    status_message      TEXT CHECK (octet_length(status_message) <= 4096),
    created_at_ms       BIGINT NOT NULL,
    updated_at_ms       BIGINT NOT NULL,
    ttl_ms              BIGINT CHECK (ttl_ms > 0),
    expires_at_ms       BIGINT,
    poll_interval_ms    BIGINT NOT NULL CHECK (poll_interval_ms > 0),
    result              TEXT CHECK (result IS NULL OR json_typeof(result::json) = 'object'),
    error               TEXT CHECK (error IS NULL OR json_typeof(error::json) = 'object'),
    input_requests      TEXT CHECK (input_requests IS NULL
                                    OR json_typeof(input_requests::json) = 'object'),
    input_responses     TEXT NOT NULL DEFAULT '{}'
                        CHECK (json_typeof(input_responses::json) = 'object'),
    replica             TEXT NOT NULL CHECK (octet_length(replica) BETWEEN 1 AND 256),
    lease_expires_at_ms BIGINT NOT NULL,
    CHECK ((source = 'stored') = (version IS NOT NULL)),
    CHECK ((ttl_ms IS NULL) = (expires_at_ms IS NULL)),
    CHECK ((status = 'completed') = (result IS NOT NULL)),
    CHECK ((status = 'failed') = (error IS NOT NULL)),
    CHECK ((status = 'input_required') = (input_requests IS NOT NULL))
);

CREATE INDEX task_by_replica ON task (replica, status);
CREATE INDEX task_by_lease ON task (lease_expires_at_ms);
CREATE INDEX task_by_expiry ON task (expires_at_ms);

ALTER TABLE changes DROP CONSTRAINT changes_kind_check;
ALTER TABLE changes ADD CONSTRAINT changes_kind_check
    CHECK (kind IN ('tool', 'resource', 'resource_template', 'prompt', 'secret', 'grant', 'task'));
ALTER TABLE change_floor DROP CONSTRAINT change_floor_kind_check;
ALTER TABLE change_floor ADD CONSTRAINT change_floor_kind_check
    CHECK (kind IN ('tool', 'resource', 'resource_template', 'prompt', 'secret', 'grant', 'task'));
INSERT INTO change_floor (kind, seq) SELECT 'task', value FROM meta WHERE key = 'data_version';
