-- OmniForge store schema, version 2: stored resources, resource templates and prompts.
--
-- They are not versioned (see ARCHITECTURE.md): a write replaces the row and bumps
-- `meta.data_version` in the same transaction, like every other change.
-- `updated_seq` is the `data_version` of the transaction that last changed the row, so a
-- server can tell exactly which resources changed since its last look (resources/updated).

CREATE TABLE resource (
    uri           TEXT PRIMARY KEY NOT NULL CHECK (length(uri) BETWEEN 1 AND 4096),
    name          TEXT NOT NULL CHECK (length(name) >= 1),
    title         TEXT,
    description   TEXT,
    mime_type     TEXT,
    -- Exactly one of text and blob.
    text          TEXT,
    blob          BLOB,
    size          INTEGER NOT NULL CHECK (size >= 0),
    enabled       INTEGER NOT NULL CHECK (enabled IN (0, 1)),
    created_at_ms INTEGER NOT NULL,
    updated_at_ms INTEGER NOT NULL,
    updated_seq   INTEGER NOT NULL,
    CHECK ((text IS NULL) <> (blob IS NULL))
) STRICT;

CREATE TABLE resource_template (
    uri_template      TEXT PRIMARY KEY NOT NULL CHECK (length(uri_template) BETWEEN 1 AND 4096),
    name              TEXT NOT NULL CHECK (length(name) >= 1),
    title             TEXT,
    description       TEXT,
    mime_type         TEXT,
    -- Exactly one of: a static text pattern, or a script (JSON object: code, dependencies,
    -- lock, env_id, timeout_ms, memory_bytes, network).
    text              TEXT,
    script            TEXT CHECK (script IS NULL OR json_type(script) = 'object'),
    -- JSON object: variable name -> array of declared values (for completion/complete).
    completions       TEXT NOT NULL CHECK (json_type(completions) = 'object'),
    completion_script TEXT CHECK (completion_script IS NULL OR json_type(completion_script) = 'object'),
    enabled           INTEGER NOT NULL CHECK (enabled IN (0, 1)),
    created_at_ms     INTEGER NOT NULL,
    updated_at_ms     INTEGER NOT NULL,
    updated_seq       INTEGER NOT NULL,
    CHECK ((text IS NULL) <> (script IS NULL))
) STRICT;

CREATE TABLE prompt (
    name              TEXT PRIMARY KEY NOT NULL
                      CHECK (length(name) BETWEEN 1 AND 64 AND name NOT GLOB '*[^a-zA-Z0-9_-]*'),
    title             TEXT,
    description       TEXT,
    -- JSON array of {name, title?, description?, required, values}.
    arguments         TEXT NOT NULL CHECK (json_type(arguments) = 'array'),
    -- JSON array of MCP PromptMessage objects ({role, content}) with {arg} placeholders.
    messages          TEXT NOT NULL CHECK (json_type(messages) = 'array'),
    completion_script TEXT CHECK (completion_script IS NULL OR json_type(completion_script) = 'object'),
    enabled           INTEGER NOT NULL CHECK (enabled IN (0, 1)),
    created_at_ms     INTEGER NOT NULL,
    updated_at_ms     INTEGER NOT NULL,
    updated_seq       INTEGER NOT NULL
) STRICT;
