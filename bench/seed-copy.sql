-- Grows a PostgreSQL store seeded by bench/tools seed-store (at least bench_tool_00000) to 100,000
-- tools by copying bench_tool_00000's row with each name, number, title and code comment changed,
-- as seed-store would write them (no audit or change-log rows: a replica started afterwards loads
-- them at start). Used for RESULTS.md section 7 (100,000 tools) because seed-store's one create per
-- tool ran at ~22 tools/s (debug build) on the loaded machine. 665 below: the number seed-store made.
--   psql URL -v ON_ERROR_STOP=1 -f bench/seed-copy.sql
BEGIN;
INSERT INTO tool(name, enabled, current_version, created_at_ms, updated_at_ms, updated_seq)
SELECT format('bench_tool_%s', lpad(g::text, 5, '0')), true, NULL, t.created_at_ms, t.updated_at_ms, g + 1
FROM generate_series(665, 99999) g, (SELECT * FROM tool WHERE name = 'bench_tool_00000') t;
INSERT INTO tool_version(tool, number, title, description, input_schema, output_schema, read_only_hint, destructive_hint,
  idempotent_hint, open_world_hint, runtime, code, dependencies, timeout_ms, memory_bytes, network, lock, env_id, secrets,
  author, created_at_ms, examples, status, status_reason, status_by, status_at_ms, task_support, task_start)
SELECT format('bench_tool_%s', lpad(g::text, 5, '0')), 1, format('Bench tool %s', g),
  replace(v.description, 'number 0:', format('number %s:', g)), v.input_schema, v.output_schema, v.read_only_hint,
  v.destructive_hint, v.idempotent_hint, v.open_world_hint, v.runtime, replace(v.code, '# tool 0', format('# tool %s', g)),
  v.dependencies, v.timeout_ms, v.memory_bytes, v.network, v.lock, v.env_id, v.secrets, v.author, v.created_at_ms + g,
  v.examples, v.status, v.status_reason, v.status_by, v.status_at_ms, v.task_support, v.task_start
FROM generate_series(665, 99999) g, (SELECT * FROM tool_version WHERE tool = 'bench_tool_00000' AND number = 1) v;
UPDATE tool SET current_version = 1 WHERE current_version IS NULL;
UPDATE meta SET value = 100000 WHERE key = 'data_version';
COMMIT;
