-- OmniForge store schema, version 6: the call log records calls of every tool source (built-in,
-- manifest, stored), with an arguments digest and the redacted arguments and result text the
-- console shows; and hourly statistics that outlive the log's row limit (24 h charts).
--
-- The foreign key from call_log to tool_version goes: built-in and manifest calls have no
-- stored version. The store still checks, inside record_call's transaction, that a stored call's
-- version exists, and purge still deletes a tool's stored calls.
CREATE TABLE call_log_new (
    id                   INTEGER PRIMARY KEY,
    source               TEXT NOT NULL CHECK (source IN ('builtin', 'manifest', 'stored')),
    tool                 TEXT NOT NULL CHECK (length(tool) BETWEEN 1 AND 256),
    -- Set exactly for stored tools.
    version              INTEGER CHECK ((source = 'stored') = (version IS NOT NULL) AND (version IS NULL OR version >= 1)),
    started_at_ms        INTEGER NOT NULL,
    duration_ms          INTEGER NOT NULL CHECK (duration_ms >= 0),
    outcome              TEXT NOT NULL CHECK (outcome IN ('ok', 'error', 'exit', 'timeout', 'cancelled')),
    exit_code            INTEGER CHECK ((outcome = 'exit') = (exit_code IS NOT NULL)),
    bytes_out            INTEGER NOT NULL CHECK (bytes_out >= 0),
    principal            TEXT,
    error                TEXT,
    -- SHA-256 (lowercase hex) and length of the arguments' canonical JSON (digest.rs).
    arguments_sha256     TEXT CHECK (arguments_sha256 IS NULL
                             OR (length(arguments_sha256) = 64 AND arguments_sha256 NOT GLOB '*[^0-9a-f]*')),
    arguments_bytes      INTEGER CHECK (arguments_bytes IS NULL OR arguments_bytes >= 0),
    -- Redacted by the server, cut to 16 KiB; *_total_bytes is the length before the cut.
    arguments_text       TEXT,
    arguments_total_bytes INTEGER CHECK (arguments_total_bytes IS NULL OR arguments_total_bytes >= 0),
    result_text          TEXT,
    result_total_bytes   INTEGER CHECK (result_total_bytes IS NULL OR result_total_bytes >= 0),
    CHECK ((arguments_sha256 IS NULL) = (arguments_bytes IS NULL)),
    CHECK ((arguments_text IS NULL) = (arguments_total_bytes IS NULL)),
    CHECK ((result_text IS NULL) = (result_total_bytes IS NULL))
) STRICT;

INSERT INTO call_log_new (id, source, tool, version, started_at_ms, duration_ms, outcome,
    exit_code, bytes_out, principal, error)
SELECT id, 'stored', tool, version, started_at_ms, duration_ms, outcome, exit_code, bytes_out,
    principal, error
FROM call_log;
DROP TABLE call_log;
ALTER TABLE call_log_new RENAME TO call_log;
CREATE INDEX call_log_by_tool ON call_log (tool, id DESC);
CREATE INDEX call_log_by_principal ON call_log (principal, id DESC);

-- Per tool per hour: counts and a duration histogram (stats.rs: 48 buckets), updated in the
-- transaction of every call-log write, kept for StoreConfig::call_stats_max_age whatever the
-- log's row limit. Calls recorded before this migration are not counted here.
CREATE TABLE call_hour (
    hour_start_ms INTEGER NOT NULL CHECK (hour_start_ms % 3600000 = 0),
    source        TEXT NOT NULL CHECK (source IN ('builtin', 'manifest', 'stored')),
    tool          TEXT NOT NULL,
    calls         INTEGER NOT NULL CHECK (calls >= 1),
    errors        INTEGER NOT NULL CHECK (errors BETWEEN 0 AND calls),
    max_ms        INTEGER NOT NULL CHECK (max_ms >= 0),
    last_call_ms  INTEGER NOT NULL,
    -- JSON array of 48 bucket counts.
    buckets       TEXT NOT NULL CHECK (json_type(buckets) = 'array' AND json_array_length(buckets) = 48),
    PRIMARY KEY (hour_start_ms, source, tool)
) STRICT;
CREATE INDEX call_hour_by_tool ON call_hour (tool, hour_start_ms);
