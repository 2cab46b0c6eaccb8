-- OmniForge store schema, version 7: secrets encrypted at rest (issue 14) and secret grants per
-- tool version (issue 11), with the change feed's new kind `grant`.
--
-- Values cannot be encrypted in SQL: existing values move to the nullable `value` column as
-- plain text, and the store seals them the next time it opens with a keyring, in one
-- transaction (sqlite/secrets.rs), after which `value` is NULL everywhere.
CREATE TABLE secret_new (
    name          TEXT PRIMARY KEY NOT NULL
                  CHECK (length(name) BETWEEN 1 AND 64 AND name NOT GLOB '*[^a-zA-Z0-9_]*'
                         AND substr(name, 1, 1) NOT GLOB '[0-9]'),
    -- A value stored before encryption at rest, awaiting a keyring.
    value         TEXT,
    -- 1 ‖ nonce (24) ‖ XChaCha20-Poly1305 ciphertext ‖ tag (16), under key `key_id`, with the
    -- key id and the name as associated data (keyring.rs).
    sealed        BLOB,
    key_id        TEXT CHECK (key_id IS NULL OR length(key_id) BETWEEN 1 AND 64),
    updated_at_ms INTEGER NOT NULL,
    CHECK ((value IS NULL) <> (sealed IS NULL)),
    CHECK ((sealed IS NULL) = (key_id IS NULL))
) STRICT;

INSERT INTO secret_new (name, value, updated_at_ms) SELECT name, value, updated_at_ms FROM secret;
DROP TABLE secret;
ALTER TABLE secret_new RENAME TO secret;

-- A secret granted to one exact tool version. Gone with the secret or the version.
CREATE TABLE secret_grant (
    secret        TEXT NOT NULL REFERENCES secret (name) ON DELETE CASCADE,
    tool          TEXT NOT NULL,
    version       INTEGER NOT NULL,
    granted_by    TEXT NOT NULL,
    granted_at_ms INTEGER NOT NULL,
    PRIMARY KEY (secret, tool, version),
    FOREIGN KEY (tool, version) REFERENCES tool_version (tool, number) ON DELETE CASCADE
) STRICT;
CREATE INDEX secret_grant_by_tool ON secret_grant (tool, version);

-- The change feed's kinds gain `grant` (key: the tool name). Both tables are rebuilt for their
-- CHECK; the grant floor starts at the current counter, as migration 3 started every kind.
CREATE TABLE changes_new (
    seq   INTEGER PRIMARY KEY NOT NULL,
    kind  TEXT NOT NULL
          CHECK (kind IN ('tool', 'resource', 'resource_template', 'prompt', 'secret', 'grant')),
    key   TEXT NOT NULL,
    at_ms INTEGER NOT NULL
) STRICT;
INSERT INTO changes_new (seq, kind, key, at_ms) SELECT seq, kind, key, at_ms FROM changes;
DROP TABLE changes;
ALTER TABLE changes_new RENAME TO changes;

CREATE TABLE change_floor_new (
    kind TEXT PRIMARY KEY NOT NULL
         CHECK (kind IN ('tool', 'resource', 'resource_template', 'prompt', 'secret', 'grant')),
    seq  INTEGER NOT NULL
) STRICT;
INSERT INTO change_floor_new (kind, seq) SELECT kind, seq FROM change_floor;
DROP TABLE change_floor;
ALTER TABLE change_floor_new RENAME TO change_floor;
INSERT INTO change_floor (kind, seq) SELECT 'grant', value FROM meta WHERE key = 'data_version';
