#!/usr/bin/env bash
# w7-catalog against an already seeded PostgreSQL database (issue 14, 100,000 tools), with the
# command lines of scripts/bench's w7 (server on CPU 0, loadgen on CPU 1, first tools/list page
# with 1 client for 6 s after 1.5 s of warm-up; then propagation.py from replica B to replica A).
# Also records when the replica answered `initialize` (catalog loaded) and its peak RSS.
#
#   bench/w7-catalog.sh PGURL LABEL OMNIFORGE_BIN LOADGEN_BIN OUT_DIR [PROPAGATION_N]
#
# Seeding 100,000 tools with seed-store (one create_tool per tool) is too slow for a session on
# this shared machine; RESULTS.md section 7 says how the database of the recorded run was seeded.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd); BENCH=$ROOT/bench
PGURL=$1 LABEL=$2 OMNI=$3 LG=$4 OUT=$5 PROP=${6:-}
mkdir -p "$OUT"; RES=$OUT/results.jsonl
PY1=$ROOT/.deps/py-mcp1/bin/python
RUN_ID=$(date -u +%Y%m%dT%H%M%SZ)
log() { echo "[$(date -u +%H:%M:%S)] $*" >&2; }
free_port() { "$PY1" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
INIT='{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"bench","version":"0"}}}'
rss_kb() { awk '/VmRSS/{print $2}' "/proc/$1/status"; }
hwm_kb() { awk '/VmHWM/{print $2}' "/proc/$1/status"; }
start() { # DATA PORT
  URL=http://127.0.0.1:$2/mcp
  local t0=$(date +%s.%N)
  taskset -c 0 "$OMNI" --data-dir "$1" --database "$PGURL" serve --listen 127.0.0.1:$2 >"$OUT/server-$LABEL-$2.log" 2>&1 </dev/null &
  SPID=$!
  for i in $(seq 1 12000); do
    kill -0 "$SPID" 2>/dev/null || { log "server exited"; tail -5 "$OUT/server-$LABEL-$2.log"; exit 1; }
    if [[ $(curl -s -o /dev/null -w '%{http_code}' -X POST "$URL" -H 'content-type: application/json' \
         -H 'accept: application/json, text/event-stream' -d "$INIT" 2>/dev/null) == 200 ]]; then break; fi
    sleep 0.05
  done
  READY_S=$(echo "$(date +%s.%N) - $t0" | bc)
}
mkdir -p $OUT/data/$LABEL-a
port=$(free_port); start $OUT/data/$LABEL-a $port
sleep 1
idle=$(rss_kb $SPID); hwm=$(hwm_kb $SPID)
log "$LABEL: ready after ${READY_S}s, idle RSS ${idle} kB, peak so far ${hwm} kB"
taskset -c 1 "$LG" http --out "$RES" --tag run="$RUN_ID" --tag load1="$(cut -d' ' -f1 /proc/loadavg)" --url "$URL" --clients 1 --duration-s 6 --warmup-s 1.5 --method list --expect bench_tool_ \
  --rss-pid "$SPID" --tag workload=w7-catalog --tag system=$LABEL --tag transport=http-session --tag tools=100000 --tag idle_rss_kb="$idle" --tag ready_s="$READY_S" --tag start_peak_kb="$hwm"
log "$LABEL: after list RSS $(rss_kb $SPID) kB, peak $(hwm_kb $SPID) kB"
if [[ -n $PROP ]]; then
  A_URL=$URL A_PID=$SPID
  mkdir -p $OUT/data/$LABEL-b
  port=$(free_port); start $OUT/data/$LABEL-b $port; B_PID=$SPID
  log "$LABEL: propagation of $PROP creates B -> A (B ready after ${READY_S}s)"
  prop=$(taskset -c 1 "$PY1" "$BENCH/propagation.py" "$URL" "$A_URL" $PROP)
  echo "{\"workload\":\"w7-propagation\",\"system\":\"$LABEL\",\"run\":\"$RUN_ID\",\"load1\":\"$(cut -d' ' -f1 /proc/loadavg)\",\"rss_a_kb\":$(rss_kb "$A_PID"),\"rss_b_kb\":$(rss_kb "$B_PID"),\"hwm_a_kb\":$(hwm_kb "$A_PID"),\"data\":$prop}" | tee -a "$RES"
  log "$LABEL: after propagation RSS A $(rss_kb $A_PID) kB, B $(rss_kb $B_PID) kB"
  kill $B_PID; wait $B_PID || true
  SPID=$A_PID
fi
kill $SPID; wait $SPID || true
