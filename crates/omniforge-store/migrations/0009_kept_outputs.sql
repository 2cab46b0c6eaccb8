-- OmniForge store schema, version 9: kept outputs (issues 11 and 14). The whole stdout and
-- stderr of a script result that was cut for the client, readable only by the principal that
-- made the call (or a reader the server allows to read all), until it expires. The store
-- treats an expired row as absent at once, and deletes it at the next purge_expired_outputs.
CREATE TABLE kept_output (
    run_id        TEXT PRIMARY KEY NOT NULL
                  CHECK (length(run_id) BETWEEN 1 AND 128 AND run_id NOT GLOB '*[^a-zA-Z0-9_.:-]*'),
    owner         TEXT NOT NULL CHECK (length(owner) BETWEEN 1 AND 512),
    tool          TEXT NOT NULL,
    -- At most 1 MiB each (checked in bytes).
    stdout        TEXT NOT NULL CHECK (length(CAST(stdout AS BLOB)) <= 1048576),
    stderr        TEXT NOT NULL CHECK (length(CAST(stderr AS BLOB)) <= 1048576),
    created_at_ms INTEGER NOT NULL,
    expires_at_ms INTEGER NOT NULL CHECK (expires_at_ms >= created_at_ms)
) STRICT;
CREATE INDEX kept_output_by_expiry ON kept_output (expires_at_ms);
