-- OmniForge store schema, version 4: who made each logged call, and why it failed.
--
-- Both are NULL in rows recorded before this migration. `error` is a short text (the store cuts
-- it to MAX_CALL_ERROR_BYTES); secret values never reach it (the server redacts first).
ALTER TABLE call_log ADD COLUMN principal TEXT;
ALTER TABLE call_log ADD COLUMN error TEXT;
