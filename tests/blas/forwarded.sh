#!/bin/bash
# Runs a program forwarded through Wormhole against a private wormhole-server.
# Usage: forwarded.sh <build-dir> [--backend sim|cuda|auto|stacked] [--server-log FILE] -- <program> [args...]
# Starts wormhole-server on a private socket, waits for it, runs the program
# with LD_LIBRARY_PATH=<build>/guest-lib and WORMHOLE_SOCKET set, stops the
# server (SIGTERM: it prints its statistics) and exits with the program's
# status (or 3 if the server could not start).
# --backend stacked: the program's server runs the cuda backend with
# Wormhole's own drop-ins as its driver (--allow-dropin-driver), forwarding to
# a second, sim server (docs/hardware.md); its log then follows the first's.
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
# WH_TEST_STACKED=1 (ctest label `stacked`): the sim backend asked for is
# reached through a cuda-backend server stacked over it.
if [ -n "${WH_TEST_STACKED:-}" ] && [ "${WH_TEST_STACKED}" != 0 ] && [ "$backend" = sim ]; then backend=stacked; fi
sock="$(mktemp -u /tmp/wh-test-XXXXXX).sock"
log="${server_log:-$(mktemp /tmp/wh-server-XXXXXX.log)}"
bpid=""
stop_pid() {
  if kill -0 "$1" 2>/dev/null; then
    kill -TERM "$1" 2>/dev/null
    for _ in $(seq 1 100); do kill -0 "$1" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$1" 2>/dev/null
  fi
  wait "$1" 2>/dev/null
}
wait_socket() {  # socket pid log
  for _ in $(seq 1 200); do
    [ -S "$1" ] && return 0
    kill -0 "$2" 2>/dev/null || { echo "forwarded.sh: wormhole-server exited:" >&2; cat "$3" >&2; exit 3; }
    sleep 0.05
  done
  [ -S "$1" ] || { echo "forwarded.sh: no socket $1" >&2; exit 3; }
}
if [ "$backend" = stacked ]; then
  bsock="${sock%.sock}-b.sock"
  blog="$(mktemp /tmp/wh-server-b-XXXXXX.log)"
  # Both servers sleep as soon as they wait (WORMHOLE_SPIN=0): three spinning
  # parties on two cores starve the one with work (docs/hardware.md).
  WORMHOLE_SPIN=0 "$build/bin/wormhole-server" --backend sim --socket "$bsock" --log-level warn >"$blog" 2>&1 &
  bpid=$!
  wait_socket "$bsock" "$bpid" "$blog"
  WORMHOLE_SPIN=0 WORMHOLE_SOCKET="$bsock" LD_LIBRARY_PATH="$build/guest-lib" \
    "$build/bin/wormhole-server" --backend cuda --allow-dropin-driver --socket "$sock" --log-level warn >"$log" 2>&1 &
else
  "$build/bin/wormhole-server" --backend "$backend" --socket "$sock" --log-level warn >"$log" 2>&1 &
fi
spid=$!
stop() {
  stop_pid "$spid"
  rm -f "$sock"
  if [ -n "$bpid" ]; then
    stop_pid "$bpid"
    rm -f "$bsock"
    { echo "--- the sim server under it:"; cat "$blog"; } >>"$log"
    rm -f "$blog"
  fi
}
trap stop EXIT
wait_socket "$sock" "$spid" "$log"
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
