#!/bin/bash
# Reliability under churn, as an operator would probe it:
#  1. for SECONDS, clients are started and killed with SIGKILL at random
#     points (while connecting, holding memory, streaming work, blocked in a
#     runaway kernel) while one verifying client checks every value it
#     computes: it must see nothing; afterwards the device memory is back to
#     where it started (read through a client: a failed read fails) and the
#     server's RSS at the end is at most 1.5 times its RSS at the start;
#  2. the server killed with SIGKILL under three blocked clients, each of
#     which had connected (READY): each gets the documented error within 2 s
#     (cudaErrorDevicesUnavailable, "link to wormhole-server lost") and
#     exits with its own status 1, not a signal.
# Usage: soak.sh BUILD SECONDS        (ctest: server.soak, 20 s; make soak: longer)
set -u
build=$(cd "$1" && pwd); secs=${2:-20}
progs=$build/tests/forward/programs
srvprogs=$build/tests/server/programs
work=$(mktemp -d /tmp/wh-soak-XXXXXX)
sock=$work/s.sock
spid=""
trap '[ -n "$spid" ] && kill -KILL $spid 2>/dev/null; pkill -KILL -f "$work" 2>/dev/null; rm -rf "$work"' EXIT
export WORMHOLE_SOCKET=$sock LD_LIBRARY_PATH=$build/guest-lib
fail=0
start_server() {
  "$build/bin/wormhole-server" --backend sim --sim-threads 2 --socket "$sock" --log-level warn --no-stats \
    >>"$work/server.log" 2>&1 &
  spid=$!
  for _ in $(seq 100); do [ -S "$sock" ] && return 0; sleep 0.05; done
  echo "FAIL: the server did not start"; cat "$work/server.log"; exit 1
}
rss_kb() { awk '/^VmRSS/ { print $2 }' /proc/$spid/status; }
free_bytes() { "$progs/meminfo" | sed -n 's/^free=\([0-9]*\).*/\1/p'; }

start_server
base_free=$(free_bytes)
case $base_free in
  ''|*[!0-9]*) echo "FAIL: cannot read the device's free memory through a client (got '$base_free')"; exit 1 ;;
esac
"$srvprogs/verify_loop" "$secs" >"$work/verify.out" 2>&1 &
vpid=$!
sleep 1
rss0=$(rss_kb)
end=$(( $(date +%s) + secs )); kills=0; mid_rss=""
while [ "$(date +%s)" -lt "$end" ]; do
  case $(( RANDOM % 4 )) in
    0) "$progs/hold" $(( 8 + RANDOM % 64 )) >/dev/null 2>&1 & ;;
    1) "$progs/matmul" 40 >/dev/null 2>&1 & ;;
    2) "$progs/runaway" wait >/dev/null 2>&1 & ;;
    3) "$progs/vector_add" >/dev/null 2>&1 & ;;
  esac
  c=$!
  sleep "0.$(( RANDOM % 4 ))$(( RANDOM % 10 ))"
  kill -KILL $c 2>/dev/null && kills=$((kills + 1))
  wait $c 2>/dev/null
  [ -z "$mid_rss" ] && [ "$(date +%s)" -ge $(( end - secs / 2 )) ] && mid_rss=$(rss_kb)
done
if wait $vpid; then
  echo "verifying client: $(cat "$work/verify.out")"
else
  echo "FAIL: the verifying client saw something:"; cat "$work/verify.out"; fail=1
fi
# Every killed client's memory comes back.
now=""
for _ in $(seq 50); do now=$(free_bytes); [ "$now" = "$base_free" ] && break; sleep 0.2; done
if [ -z "$now" ]; then echo "FAIL: cannot read the device's free memory through a client at the end"; fail=1
elif [ "$now" != "$base_free" ]; then echo "FAIL: device memory free $now, was $base_free"; fail=1; fi
rss1=$(rss_kb)
echo "clients killed: $kills in ${secs} s; server RSS ${rss0} kB at start, ${mid_rss:-?} kB halfway, ${rss1} kB at the end"
# The bound: at most 1.5 times the RSS at the start. At the start the server
# holds its code, the sim device and the verifying client's session; at the
# end it holds the same again: every killed client's session, its device
# memory (the sim device's memory is the server's heap) and its threads are
# gone, and the allocator returns large freed blocks. Halfway, live clients
# hold up to 72 MiB each, so the RSS there says nothing; the end does
# (measured: 22 MiB at the start, 60 MiB halfway, 18-23 MiB at the end).
# Half the start (about 11 MiB) over the 40-odd clients killed in 20 s is
# a leak of about 250 kB per client, over the 1,300-odd of `make soak` about
# 8 kB.
if [ $(( rss1 * 2 )) -gt $(( rss0 * 3 )) ]; then
  echo "FAIL: server RSS ${rss1} kB at the end, more than 1.5 x ${rss0} kB at the start"; fail=1
fi
kill -0 $spid || { echo "FAIL: the server died"; cat "$work/server.log"; exit 1; }

# The server killed under blocked clients.
pids=()
for i in 1 2 3; do
  "$progs/runaway" wait >"$work/blocked$i.out" 2>&1 &
  pids+=($!)
done
for i in 1 2 3; do
  for _ in $(seq 200); do grep -q READY "$work/blocked$i.out" && break; sleep 0.05; done
  # READY: connected, its kernel launched, now waiting in cudaDeviceSynchronize.
  grep -q READY "$work/blocked$i.out" || { echo "FAIL: blocked client $i never connected (no READY in 10 s):";
    cat "$work/blocked$i.out"; fail=1; }
done
t0=$(date +%s%N)
kill -KILL $spid; spid=""
worst=0 i=0
for p in "${pids[@]}"; do
  i=$((i + 1))
  for _ in $(seq 100); do kill -0 $p 2>/dev/null || break; sleep 0.05; done
  if kill -0 $p 2>/dev/null; then echo "FAIL: a blocked client still waits 5 s after the server died"; fail=1; kill -KILL $p; fi
  rc=0; wait $p 2>/dev/null || rc=$?
  ms=$(( ($(date +%s%N) - t0) / 1000000 )); [ $ms -gt $worst ] && worst=$ms
  # The documented error (docs/operations.md): the call fails with
  # cudaErrorDevicesUnavailable and the library says the link was lost;
  # runaway then exits 1 by itself.
  out="$work/blocked$i.out"
  if ! grep -qx 'synchronize: cudaErrorDevicesUnavailable' "$out" || ! grep -q '^wormhole: link to wormhole-server lost' "$out" ||
     [ $rc -ne 1 ]; then
    echo "FAIL: blocked client $i did not end with the documented error (exit $rc):"; cat "$out"; fail=1
  fi
done
echo "server killed under 3 blocked clients: all had an error after ${worst} ms"
[ $worst -le 2000 ] || { echo "FAIL: more than 2 s"; fail=1; }
grep -h "synchronize:\|link to wormhole-server lost" "$work"/blocked*.out | cut -c1-60 | sort | uniq -c
[ $fail -eq 0 ] && echo PASS
exit $fail
