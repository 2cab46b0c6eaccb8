-- OmniForge store schema, version 3: the change feed.
--
-- Every write transaction that changes a tool, secret, resource, resource template or prompt
-- increments `meta.data_version` once per change and appends one row here with the new value as
-- its `seq`, in the same transaction. Writers hold the write lock from BEGIN IMMEDIATE to commit,
-- so seqs follow commit order: a reader that saw seq N never later finds a change numbered N or
-- lower. Readers ask for the rows after the seq they have seen. Call log writes are not changes.
CREATE TABLE changes (
    seq   INTEGER PRIMARY KEY NOT NULL,
    kind  TEXT NOT NULL
          CHECK (kind IN ('tool', 'resource', 'resource_template', 'prompt', 'secret')),
    -- Tool name, resource URI, URI template, prompt name or secret name (never a value).
    key   TEXT NOT NULL,
    at_ms INTEGER NOT NULL
) STRICT;

-- Only the newest changes are kept (the store's `change_log_max_rows`). Per kind, the highest
-- seq of that kind pruned so far: a reader whose seq is lower may have missed a change of the
-- kind and must reload the kind whole. The history before this migration counts as pruned.
CREATE TABLE change_floor (
    kind TEXT PRIMARY KEY NOT NULL
         CHECK (kind IN ('tool', 'resource', 'resource_template', 'prompt', 'secret')),
    seq  INTEGER NOT NULL
) STRICT;

INSERT INTO change_floor (kind, seq)
SELECT kind, (SELECT value FROM meta WHERE key = 'data_version')
FROM (SELECT 'tool' AS kind UNION ALL SELECT 'resource' UNION ALL SELECT 'resource_template'
      UNION ALL SELECT 'prompt' UNION ALL SELECT 'secret');
