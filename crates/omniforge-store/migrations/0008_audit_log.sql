-- OmniForge store schema, version 8: the audit log (issue 11). One record per authoring or
-- admin action, inserted in the same transaction as the action. Append-only: updates are
-- refused, and deletes too, except of records older than the retention cut that prune_audit
-- raises (in meta, only ever forward) in its own transaction. This guards against mistakes;
-- whoever can write the file directly can drop the triggers.
CREATE TABLE audit_log (
    -- AUTOINCREMENT: ids only grow and are never reused, across prunes too.
    id                INTEGER PRIMARY KEY AUTOINCREMENT,
    at_ms             INTEGER NOT NULL,
    principal         TEXT NOT NULL CHECK (length(principal) BETWEEN 1 AND 512),
    action            TEXT NOT NULL CHECK (action IN ('create', 'update', 'rollback', 'delete',
                          'enable', 'disable', 'approve', 'reject', 'set', 'grant', 'revoke',
                          'import', 'rotate_key', 'encrypt', 'prune')),
    object_kind       TEXT NOT NULL CHECK (object_kind IN ('tool', 'secret', 'resource',
                          'resource_template', 'prompt', 'pack', 'keyring', 'audit_log')),
    object_name       TEXT NOT NULL,
    version           INTEGER CHECK (version IS NULL OR version >= 1),
    definition_sha256 TEXT CHECK (definition_sha256 IS NULL
                          OR (length(definition_sha256) = 64 AND definition_sha256 NOT GLOB '*[^0-9a-f]*')),
    -- JSON object; never a secret value.
    detail            TEXT NOT NULL CHECK (json_type(detail) = 'object')
) STRICT;
CREATE INDEX audit_by_time ON audit_log (at_ms);
CREATE INDEX audit_by_principal ON audit_log (principal, id);
CREATE INDEX audit_by_object ON audit_log (object_kind, object_name, id);

-- Records with at_ms below this may be deleted (by prune_audit only).
INSERT INTO meta (key, value) VALUES ('audit_pruned_before_ms', 0);

CREATE TRIGGER audit_log_no_update BEFORE UPDATE ON audit_log
BEGIN
    SELECT RAISE(ABORT, 'the audit log is append-only');
END;

CREATE TRIGGER audit_log_no_delete BEFORE DELETE ON audit_log
WHEN OLD.at_ms >= (SELECT value FROM meta WHERE key = 'audit_pruned_before_ms')
BEGIN
    SELECT RAISE(ABORT, 'the audit log is append-only: only records older than the retention cut may be deleted');
END;

CREATE TRIGGER audit_cut_only_moves_forward BEFORE UPDATE ON meta
WHEN OLD.key = 'audit_pruned_before_ms' AND NEW.value < OLD.value
BEGIN
    SELECT RAISE(ABORT, 'the audit retention cut only moves forward');
END;

CREATE TRIGGER audit_cut_is_kept BEFORE DELETE ON meta
WHEN OLD.key = 'audit_pruned_before_ms'
BEGIN
    SELECT RAISE(ABORT, 'the audit retention cut is kept');
END;
