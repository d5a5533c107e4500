#!/bin/bash
# Runs a program forwarded through Wormhole against a private wormhole-server.
# Usage: forwarded.sh <build-dir> [--backend sim|cuda|auto] [--server-log FILE] -- <program> [args...]
# Starts wormhole-server on a private socket, waits for it, runs the program
# with LD_LIBRARY_PATH=<build>/guest-lib and WORMHOLE_SOCKET set, stops the
# server (SIGTERM: it prints its statistics) and exits with the program's
# status (or 3 if the server could not start).
set -u
build="$1"; shift
backend=sim
server_log=""
while [ $# -gt 0 ] && [ "$1" != "--" ]; do
  case "$1" in
    --backend) backend="$2"; shift 2 ;;
    --server-log) server_log="$2"; shift 2 ;;
    *) echo "forwarded.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
[ "${1:-}" = "--" ] && shift
sock="$(mktemp -u /tmp/wh-test-XXXXXX).sock"
log="${server_log:-$(mktemp /tmp/wh-server-XXXXXX.log)}"
"$build/bin/wormhole-server" --backend "$backend" --socket "$sock" --log-level warn >"$log" 2>&1 &
spid=$!
stop() {
  if kill -0 "$spid" 2>/dev/null; then
    kill -TERM "$spid" 2>/dev/null
    for _ in $(seq 1 100); do kill -0 "$spid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$spid" 2>/dev/null
  fi
  wait "$spid" 2>/dev/null
  rm -f "$sock"
}
trap stop EXIT
for _ in $(seq 1 200); do
  [ -S "$sock" ] && break
  kill -0 "$spid" 2>/dev/null || { echo "forwarded.sh: wormhole-server exited:" >&2; cat "$log" >&2; exit 3; }
  sleep 0.05
done
[ -S "$sock" ] || { echo "forwarded.sh: no socket $sock" >&2; exit 3; }
# Sanitizer builds: the program (built by nvcc) is not instrumented but the
# drop-ins it loads are, so their runtime must come first (WH_PRELOAD).
WORMHOLE_SOCKET="$sock" LD_LIBRARY_PATH="$build/guest-lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
  env ${WH_PRELOAD:+LD_PRELOAD="$WH_PRELOAD"} "$@"
rc=$?
stop
trap - EXIT
if [ -z "$server_log" ]; then
  if [ $rc -ne 0 ]; then echo "--- wormhole-server log:" >&2; cat "$log" >&2; fi
  rm -f "$log"
fi
exit $rc
