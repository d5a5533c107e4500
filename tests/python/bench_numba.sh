#!/bin/bash
# make bench-numba: the cost of a Numba kernel launch through Wormhole
# (kernel[4, 32](a, b, c), three device arrays) and of the same launch made
# straight through cuda-python's driver binding, against the forwarded null
# call measured in the same run (bench_forward: cudaMemGetInfo p50), server
# and client pinned to different cores as in make bench-forward. Checks in
# the server's statistics that it executed every launch made; ends with the
# summary line. Usage: bench_numba.sh BUILD_DIR [SECONDS]
. "$(dirname "$0")/../forward/bench/bench_server.sh"
src=$(cd "$(dirname "$0")/../.." && pwd)
venv=$("$src/scripts/python-env.sh") || { echo "bench_numba.sh: no Python environment (PyPI?)"; exit 1; }
bench_run bench_forward --launch-seconds 1 --cpus $CCPU,$SCPU
null_ns=$(echo "$OUT" | sed -n 's/.*null_call_rtt_p50_ns=\([0-9]*\).*/\1/p')
bench_launches() {  # the Python bench against a server of its own
  SOCK=/tmp/wh-numba-$$.sock
  SLOG=$(mktemp /tmp/wh-numba-server.XXXXXX)
  taskset -c $SCPU "$SERVER" --backend sim --sim-threads 1 --socket "$SOCK" --log-level warn >"$SLOG" 2>&1 &
  local spid=$!
  for _ in $(seq 100); do [ -S "$SOCK" ] && break; sleep 0.05; done
  OUT=$(WORMHOLE_SOCKET=$SOCK taskset -c $CCPU "$BUILD/bin/wormhole-run" "$venv/bin/python" \
        "$src/tests/python/bench_numba_launch.py" "$SECS" 2>/dev/null)
  local rc=$?
  kill -TERM $spid
  wait $spid
  rm -f "$SOCK"
  if [ $rc -ne 0 ]; then echo "$OUT"; echo "bench_numba_launch.py failed (exit $rc)"; cat "$SLOG"; exit 1; fi
}
bench_launches
n=$(echo "$OUT" | sed -n 's/^numba_launches=//p')
d=$(echo "$OUT" | sed -n 's/^driver_launches=//p')
# One launch more: the warm-up that compiles and checks the kernel.
bench_check_count Launch $((n + d + 1)) "launches made (Numba, the driver binding, one warm-up)"
rm -f "$SLOG"
line=$(echo "$OUT" | grep '^numba_launch_per_s=')
echo "$line null_call_rtt_p50_ns=$null_ns"
