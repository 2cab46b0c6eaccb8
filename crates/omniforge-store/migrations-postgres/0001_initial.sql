-- OmniForge store schema on PostgreSQL, version 1: the tables, constraints and triggers of
-- SQLite's migrations 0001-0009 (tools and versions with their status and examples, example
-- results, the call log of every source and its hourly statistics, sealed secrets and their
-- grants, the append-only audit log, kept outputs, resources, resource templates, prompts, the
-- change feed), with PostgreSQL's types. The store's statements (src/engine/) are the same on
-- both backends; this schema makes them mean the same.
--
-- Times are unix milliseconds (UTC) in BIGINT; every integer is BIGINT (sqlx decodes i64 from
-- INT8). Booleans are BOOLEAN. JSON columns hold compact JSON text (TEXT checked with a cast to
-- `json`, which keeps the text exactly as written: key order and \u0000 escapes that `jsonb`
-- refuses). Bytes (sealed secrets, blobs) are BYTEA. Text columns that the store orders by are
-- COLLATE "C", SQLite's byte order. Text never holds NUL: the store refuses it on both
-- backends before it reaches the database.
--
-- Every write transaction that changes something first locks the `data_version` row (SELECT ...
-- FOR UPDATE) and holds it to commit, so writers are serialized, and change numbers follow
-- commit order, across every replica on the database.

CREATE TABLE meta (
    key   TEXT PRIMARY KEY,
    value BIGINT NOT NULL
);

INSERT INTO meta (key, value) VALUES ('data_version', 0), ('audit_pruned_before_ms', 0);

CREATE TABLE tool (
    name            TEXT COLLATE "C" PRIMARY KEY CHECK (name ~ '^[a-zA-Z0-9_-]{1,64}$'),
    enabled         BOOLEAN NOT NULL,
    -- Always a live version (trigger below); NULL while the tool has none.
    current_version BIGINT,
    created_at_ms   BIGINT NOT NULL,
    updated_at_ms   BIGINT NOT NULL,
    -- The change seq of the transaction that last changed this row: orders `list_enabled`.
    updated_seq     BIGINT NOT NULL
);

CREATE INDEX tool_by_update ON tool (enabled, updated_seq DESC);

CREATE TABLE tool_version (
    tool             TEXT COLLATE "C" NOT NULL REFERENCES tool (name) ON DELETE CASCADE,
    number           BIGINT NOT NULL CHECK (number >= 1),
    title            TEXT,
    description      TEXT NOT NULL,
    input_schema     TEXT NOT NULL CHECK (json_typeof(input_schema::json) = 'object'),
    output_schema    TEXT CHECK (output_schema IS NULL OR json_typeof(output_schema::json) = 'object'),
    read_only_hint   BOOLEAN,
    destructive_hint BOOLEAN,
    idempotent_hint  BOOLEAN,
    open_world_hint  BOOLEAN,
    runtime          TEXT NOT NULL CHECK (runtime IN ('python')),
    code             TEXT NOT NULL,
    -- JSON array of PEP 508 requirement strings.
    dependencies     TEXT NOT NULL CHECK (json_typeof(dependencies::json) = 'array'),
    timeout_ms       BIGINT NOT NULL CHECK (timeout_ms >= 0),
    memory_bytes     BIGINT NOT NULL CHECK (memory_bytes >= 0),
    network          BOOLEAN NOT NULL,
    -- The resolved, hash-pinned requirements text.
    lock             TEXT NOT NULL,
    env_id           TEXT NOT NULL,
    -- JSON array of secret names.
    secrets          TEXT NOT NULL CHECK (json_typeof(secrets::json) = 'array'),
    author           TEXT NOT NULL,
    created_at_ms    BIGINT NOT NULL,
    -- JSON array of example calls (objects), part of the immutable definition.
    examples         TEXT NOT NULL DEFAULT '[]' CHECK (json_typeof(examples::json) = 'array'),
    status           TEXT NOT NULL DEFAULT 'live'
                     CHECK (status IN ('live', 'pending', 'draft', 'rejected')),
    -- A draft's failure, a rejection's reason, or 'superseded by version N'.
    status_reason    TEXT,
    -- Who approved or rejected it, and when; set together by every status change.
    status_by        TEXT,
    status_at_ms     BIGINT,
    PRIMARY KEY (tool, number)
);

CREATE INDEX tool_version_by_status ON tool_version (status, author);

-- Deferred: a tool and its first version are inserted in one transaction, tool first.
ALTER TABLE tool ADD FOREIGN KEY (name, current_version) REFERENCES tool_version (tool, number)
    DEFERRABLE INITIALLY DEFERRED;

-- Versions are immutable except their status columns. A future content column must be added
-- to this list.
CREATE FUNCTION tool_version_immutable() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'tool versions are immutable';
END
$$;

CREATE TRIGGER tool_version_immutable
BEFORE UPDATE OF tool, number, title, description, input_schema, output_schema, read_only_hint,
    destructive_hint, idempotent_hint, open_world_hint, runtime, code, dependencies, timeout_ms,
    memory_bytes, network, lock, env_id, secrets, author, created_at_ms, examples
ON tool_version
FOR EACH ROW EXECUTE FUNCTION tool_version_immutable();

-- The status changes only along pending -> live | rejected and draft -> rejected, and every
-- change says who made it and when.
CREATE FUNCTION tool_version_status() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NOT (
        ((OLD.status = 'pending' AND NEW.status IN ('live', 'rejected'))
            OR (OLD.status = 'draft' AND NEW.status = 'rejected'))
        AND NEW.status_by IS NOT NULL AND NEW.status_at_ms IS NOT NULL
    ) THEN
        RAISE EXCEPTION 'a tool version''s status only goes pending -> live | rejected or draft -> rejected';
    END IF;
    RETURN NEW;
END
$$;

CREATE TRIGGER tool_version_status
BEFORE UPDATE OF status, status_reason, status_by, status_at_ms ON tool_version
FOR EACH ROW EXECUTE FUNCTION tool_version_status();

-- The current version is always a live one. A tool is inserted without one and then pointed at
-- its first version once that exists.
CREATE FUNCTION tool_current_is_live() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.current_version IS NOT NULL AND NOT EXISTS (
        SELECT 1 FROM tool_version
        WHERE tool = NEW.name AND number = NEW.current_version AND status = 'live'
    ) THEN
        RAISE EXCEPTION 'a tool''s current version must be a live version';
    END IF;
    RETURN NEW;
END
$$;

CREATE TRIGGER tool_current_is_live
BEFORE UPDATE OF current_version ON tool
FOR EACH ROW EXECUTE FUNCTION tool_current_is_live();

CREATE FUNCTION tool_inserted_without_current() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.current_version IS NOT NULL THEN
        RAISE EXCEPTION 'a tool is inserted without a current version';
    END IF;
    RETURN NEW;
END
$$;

CREATE TRIGGER tool_inserted_without_current
BEFORE INSERT ON tool
FOR EACH ROW EXECUTE FUNCTION tool_inserted_without_current();

-- The last result of each example of a version; replaced whole at every run of the examples.
CREATE TABLE example_result (
    tool        TEXT COLLATE "C" NOT NULL,
    version     BIGINT NOT NULL,
    -- The example's index in the version's `examples`.
    idx         BIGINT NOT NULL CHECK (idx >= 0),
    passed      BOOLEAN NOT NULL,
    -- The result text (cut to 2 KiB) and, for a failed example, what did not match.
    actual      TEXT NOT NULL,
    failure     TEXT,
    run_trigger TEXT NOT NULL CHECK (run_trigger IN ('create', 'update', 'check', 'rollback', 'import')),
    ran_by      TEXT NOT NULL,
    ran_at_ms   BIGINT NOT NULL,
    PRIMARY KEY (tool, version, idx),
    FOREIGN KEY (tool, version) REFERENCES tool_version (tool, number) ON DELETE CASCADE
);

-- Calls of every tool source; no foreign key (built-in and manifest calls have no stored
-- version). The store checks a stored call's version inside record_call's transaction.
CREATE TABLE call_log (
    -- By default from the sequence; a store copy inserts the source's ids and moves it on.
    id                    BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
    source                TEXT COLLATE "C" NOT NULL CHECK (source IN ('builtin', 'manifest', 'stored')),
    tool                  TEXT COLLATE "C" NOT NULL CHECK (length(tool) BETWEEN 1 AND 256),
    -- Set exactly for stored tools.
    version               BIGINT CHECK ((source = 'stored') = (version IS NOT NULL) AND (version IS NULL OR version >= 1)),
    started_at_ms         BIGINT NOT NULL,
    duration_ms           BIGINT NOT NULL CHECK (duration_ms >= 0),
    outcome               TEXT NOT NULL CHECK (outcome IN ('ok', 'error', 'exit', 'timeout', 'cancelled')),
    -- Set exactly when outcome = 'exit'.
    exit_code             BIGINT CHECK ((outcome = 'exit') = (exit_code IS NOT NULL)),
    bytes_out             BIGINT NOT NULL CHECK (bytes_out >= 0),
    -- Who called (token name, `stdio`, `cli`), and why the call failed (cut to 2 KiB).
    principal             TEXT,
    error                 TEXT,
    -- SHA-256 (lowercase hex) and length of the arguments' canonical JSON (digest.rs).
    arguments_sha256      TEXT CHECK (arguments_sha256 IS NULL OR arguments_sha256 ~ '^[0-9a-f]{64}$'),
    arguments_bytes       BIGINT CHECK (arguments_bytes IS NULL OR arguments_bytes >= 0),
    -- Redacted by the server, cut to 16 KiB; *_total_bytes is the length before the cut.
    arguments_text        TEXT,
    arguments_total_bytes BIGINT CHECK (arguments_total_bytes IS NULL OR arguments_total_bytes >= 0),
    result_text           TEXT,
    result_total_bytes    BIGINT CHECK (result_total_bytes IS NULL OR result_total_bytes >= 0),
    CHECK ((arguments_sha256 IS NULL) = (arguments_bytes IS NULL)),
    CHECK ((arguments_text IS NULL) = (arguments_total_bytes IS NULL)),
    CHECK ((result_text IS NULL) = (result_total_bytes IS NULL))
);

CREATE INDEX call_log_by_tool ON call_log (tool, id DESC);
CREATE INDEX call_log_by_principal ON call_log (principal, id DESC);

-- Per tool per hour: counts and a duration histogram (stats.rs: 48 buckets), updated in the
-- transaction of every call-log write, kept for StoreConfig::call_stats_max_age whatever the
-- log's row limit.
CREATE TABLE call_hour (
    hour_start_ms BIGINT NOT NULL CHECK (hour_start_ms % 3600000 = 0),
    source        TEXT COLLATE "C" NOT NULL CHECK (source IN ('builtin', 'manifest', 'stored')),
    tool          TEXT COLLATE "C" NOT NULL,
    calls         BIGINT NOT NULL CHECK (calls >= 1),
    errors        BIGINT NOT NULL CHECK (errors BETWEEN 0 AND calls),
    max_ms        BIGINT NOT NULL CHECK (max_ms >= 0),
    last_call_ms  BIGINT NOT NULL,
    -- JSON array of 48 bucket counts.
    buckets       TEXT NOT NULL CHECK (json_typeof(buckets::json) = 'array'
                                       AND json_array_length(buckets::json) = 48),
    PRIMARY KEY (hour_start_ms, source, tool)
);

CREATE INDEX call_hour_by_tool ON call_hour (tool, hour_start_ms);

CREATE TABLE secret (
    name          TEXT COLLATE "C" PRIMARY KEY CHECK (name ~ '^[a-zA-Z_][a-zA-Z0-9_]{0,63}$'),
    -- A value stored in plain text before encryption at rest (never written by this schema's
    -- builds; kept so that a copy of such a store stays whole), awaiting a keyring.
    value         TEXT,
    -- 1 ‖ nonce (24) ‖ XChaCha20-Poly1305 ciphertext ‖ tag (16), under key `key_id`, with the
    -- key id and the name as associated data (keyring.rs).
    sealed        BYTEA,
    key_id        TEXT CHECK (key_id IS NULL OR length(key_id) BETWEEN 1 AND 64),
    updated_at_ms BIGINT NOT NULL,
    CHECK ((value IS NULL) <> (sealed IS NULL)),
    CHECK ((sealed IS NULL) = (key_id IS NULL))
);

-- A secret granted to one exact tool version. Gone with the secret or the version.
CREATE TABLE secret_grant (
    secret        TEXT COLLATE "C" NOT NULL REFERENCES secret (name) ON DELETE CASCADE,
    tool          TEXT COLLATE "C" NOT NULL,
    version       BIGINT NOT NULL,
    granted_by    TEXT NOT NULL,
    granted_at_ms BIGINT NOT NULL,
    PRIMARY KEY (secret, tool, version),
    FOREIGN KEY (tool, version) REFERENCES tool_version (tool, number) ON DELETE CASCADE
);

CREATE INDEX secret_grant_by_tool ON secret_grant (tool, version);

-- The audit log. One record per authoring or admin action, inserted in the same transaction as
-- the action. Append-only: updates are refused, and deletes too, except of records older than
-- the retention cut that prune_audit raises (in meta, only ever forward). This guards against
-- mistakes; whoever owns the database can drop the triggers.
CREATE TABLE audit_log (
    -- Ids only grow and are never reused, across prunes too.
    id                BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
    at_ms             BIGINT NOT NULL,
    principal         TEXT NOT NULL CHECK (octet_length(principal) BETWEEN 1 AND 512),
    action            TEXT NOT NULL CHECK (action IN ('create', 'update', 'rollback', 'delete',
                          'enable', 'disable', 'approve', 'reject', 'set', 'grant', 'revoke',
                          'import', 'rotate_key', 'encrypt', 'prune')),
    object_kind       TEXT NOT NULL CHECK (object_kind IN ('tool', 'secret', 'resource',
                          'resource_template', 'prompt', 'pack', 'keyring', 'audit_log')),
    object_name       TEXT NOT NULL,
    version           BIGINT CHECK (version IS NULL OR version >= 1),
    definition_sha256 TEXT CHECK (definition_sha256 IS NULL OR definition_sha256 ~ '^[0-9a-f]{64}$'),
    -- JSON object; never a secret value.
    detail            TEXT NOT NULL CHECK (json_typeof(detail::json) = 'object')
);

CREATE INDEX audit_by_time ON audit_log (at_ms);
CREATE INDEX audit_by_principal ON audit_log (principal, id);
CREATE INDEX audit_by_object ON audit_log (object_kind, object_name, id);

CREATE FUNCTION audit_log_no_update() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'the audit log is append-only';
END
$$;

CREATE TRIGGER audit_log_no_update BEFORE UPDATE ON audit_log
FOR EACH ROW EXECUTE FUNCTION audit_log_no_update();

CREATE FUNCTION audit_log_no_delete() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF OLD.at_ms >= (SELECT value FROM meta WHERE key = 'audit_pruned_before_ms') THEN
        RAISE EXCEPTION 'the audit log is append-only: only records older than the retention cut may be deleted';
    END IF;
    RETURN OLD;
END
$$;

CREATE TRIGGER audit_log_no_delete BEFORE DELETE ON audit_log
FOR EACH ROW EXECUTE FUNCTION audit_log_no_delete();

-- TRUNCATE skips row triggers: refused outright.
CREATE TRIGGER audit_log_no_truncate BEFORE TRUNCATE ON audit_log
FOR EACH STATEMENT EXECUTE FUNCTION audit_log_no_update();

CREATE FUNCTION audit_cut_only_moves_forward() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF OLD.key = 'audit_pruned_before_ms' AND NEW.value < OLD.value THEN
        RAISE EXCEPTION 'the audit retention cut only moves forward';
    END IF;
    RETURN NEW;
END
$$;

CREATE TRIGGER audit_cut_only_moves_forward BEFORE UPDATE ON meta
FOR EACH ROW EXECUTE FUNCTION audit_cut_only_moves_forward();

CREATE FUNCTION audit_cut_is_kept() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF OLD.key = 'audit_pruned_before_ms' THEN
        RAISE EXCEPTION 'the audit retention cut is kept';
    END IF;
    RETURN OLD;
END
$$;

CREATE TRIGGER audit_cut_is_kept BEFORE DELETE ON meta
FOR EACH ROW EXECUTE FUNCTION audit_cut_is_kept();

-- Kept outputs: the whole stdout and stderr of a script result that was cut for the client,
-- readable only by the principal that made the call (or a reader the server allows to read
-- all), until it expires. The store treats an expired row as absent at once, and deletes it at
-- the next purge_expired_outputs.
CREATE TABLE kept_output (
    run_id        TEXT COLLATE "C" PRIMARY KEY CHECK (run_id ~ '^[a-zA-Z0-9_.:-]{1,128}$'),
    owner         TEXT NOT NULL CHECK (octet_length(owner) BETWEEN 1 AND 512),
    tool          TEXT NOT NULL,
    -- At most 1 MiB each (checked in bytes).
    stdout        TEXT NOT NULL CHECK (octet_length(stdout) <= 1048576),
    stderr        TEXT NOT NULL CHECK (octet_length(stderr) <= 1048576),
    created_at_ms BIGINT NOT NULL,
    expires_at_ms BIGINT NOT NULL CHECK (expires_at_ms >= created_at_ms)
);

CREATE INDEX kept_output_by_expiry ON kept_output (expires_at_ms);

CREATE TABLE resource (
    uri           TEXT COLLATE "C" PRIMARY KEY CHECK (length(uri) BETWEEN 1 AND 4096),
    name          TEXT NOT NULL CHECK (length(name) >= 1),
    title         TEXT,
    description   TEXT,
    mime_type     TEXT,
    -- Exactly one of text and blob.
    text          TEXT,
    blob          BYTEA,
    size          BIGINT NOT NULL CHECK (size >= 0),
    enabled       BOOLEAN NOT NULL,
    created_at_ms BIGINT NOT NULL,
    updated_at_ms BIGINT NOT NULL,
    updated_seq   BIGINT NOT NULL,
    CHECK ((text IS NULL) <> (blob IS NULL))
);

CREATE TABLE resource_template (
    uri_template      TEXT COLLATE "C" PRIMARY KEY CHECK (length(uri_template) BETWEEN 1 AND 4096),
    name              TEXT NOT NULL CHECK (length(name) >= 1),
    title             TEXT,
    description       TEXT,
    mime_type         TEXT,
    -- Exactly one of: a static text pattern, or a script (JSON object: code, dependencies,
    -- lock, env_id, timeout_ms, memory_bytes, network).
    text              TEXT,
    script            TEXT CHECK (script IS NULL OR json_typeof(script::json) = 'object'),
    -- JSON object: variable name -> array of declared values (for completion/complete).
    completions       TEXT NOT NULL CHECK (json_typeof(completions::json) = 'object'),
    completion_script TEXT CHECK (completion_script IS NULL OR json_typeof(completion_script::json) = 'object'),
    enabled           BOOLEAN NOT NULL,
    created_at_ms     BIGINT NOT NULL,
    updated_at_ms     BIGINT NOT NULL,
    updated_seq       BIGINT NOT NULL,
    CHECK ((text IS NULL) <> (script IS NULL))
);

CREATE TABLE prompt (
    name              TEXT COLLATE "C" PRIMARY KEY CHECK (name ~ '^[a-zA-Z0-9_-]{1,64}$'),
    title             TEXT,
    description       TEXT,
    -- JSON array of {name, title?, description?, required, values}.
    arguments         TEXT NOT NULL CHECK (json_typeof(arguments::json) = 'array'),
    -- JSON array of MCP PromptMessage objects ({role, content}) with {arg} placeholders.
    messages          TEXT NOT NULL CHECK (json_typeof(messages::json) = 'array'),
    completion_script TEXT CHECK (completion_script IS NULL OR json_typeof(completion_script::json) = 'object'),
    enabled           BOOLEAN NOT NULL,
    created_at_ms     BIGINT NOT NULL,
    updated_at_ms     BIGINT NOT NULL,
    updated_seq       BIGINT NOT NULL
);

-- The change feed: one row per change, numbered by `meta.data_version` in the writer's
-- transaction. Only the newest are kept; `change_floor` holds per kind the highest pruned seq.
CREATE TABLE changes (
    seq   BIGINT PRIMARY KEY,
    kind  TEXT NOT NULL
          CHECK (kind IN ('tool', 'resource', 'resource_template', 'prompt', 'secret', 'grant')),
    -- Tool name, resource URI, URI template, prompt name or secret name (never a value).
    key   TEXT NOT NULL,
    at_ms BIGINT NOT NULL
);

CREATE TABLE change_floor (
    kind TEXT COLLATE "C" PRIMARY KEY
         CHECK (kind IN ('tool', 'resource', 'resource_template', 'prompt', 'secret', 'grant')),
    seq  BIGINT NOT NULL
);

INSERT INTO change_floor (kind, seq)
SELECT kind, 0 FROM (VALUES ('tool'), ('resource'), ('resource_template'), ('prompt'), ('secret'),
    ('grant')) AS kinds (kind);
