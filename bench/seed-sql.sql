-- Seeds a migrated PostgreSQL store (an `omniforge --database URL` replica started once) with
-- 100,000 tools as bench/tools seed-store writes them (same title, description, schema,
-- annotations, code and limits), in one statement per table, without building bench/: used
-- for RESULTS.md section 7.1's release run. No audit or change-log rows: a replica started
-- afterwards loads the tools at start.
--   psql URL -v ON_ERROR_STOP=1 -f bench/seed-sql.sql
BEGIN;
INSERT INTO tool(name, enabled, current_version, created_at_ms, updated_at_ms, updated_seq)
SELECT format('bench_tool_%s', lpad(g::text, 5, '0')), true, NULL, 1764633600000 + g, 1764633600000 + g, g + 1
FROM generate_series(0, 99999) g;
INSERT INTO tool_version(tool, number, title, description, input_schema, output_schema, read_only_hint, destructive_hint,
  idempotent_hint, open_world_hint, runtime, code, dependencies, timeout_ms, memory_bytes, network, lock, env_id, secrets,
  author, created_at_ms, examples, status)
SELECT format('bench_tool_%s', lpad(g::text, 5, '0')), 1, format('Bench tool %s', g),
  format('Benchmark tool number %s: looks up a made-up weather forecast for a city and returns it as text. Seeded by bench/tools seed-store.', g),
  '{"additionalProperties":false,"properties":{"city":{"description":"City name, e.g. Paris","type":"string"},"days":{"description":"Forecast length in days","maximum":14,"minimum":1,"type":"integer"}},"required":["city"],"type":"object"}',
  NULL, true, false, true, false, 'python',
  format(E'import json, sys\n# tool %s\nargs = json.load(sys.stdin)\ncity = args[''city'']\ndays = int(args.get(''days'', 3))\nfor d in range(days):\n    print(f''{city} day {d + 1}: sunny, 21 C'')\n', g),
  '[]', 30000, 2147483648, false, '', 'bench-seed-no-env', '[]', 'bench', 1764633600000 + g, '[]', 'live'
FROM generate_series(0, 99999) g;
UPDATE tool SET current_version = 1 WHERE current_version IS NULL;
UPDATE meta SET value = 100000 WHERE key = 'data_version';
COMMIT;
