#!/bin/bash
# make bench-compare: Wormhole side by side with another forwarder.
# One program (compare_bench, nvcc -cudart shared, no kernels) runs through
# Wormhole's drop-in libcudart and through the other forwarder's, in
# alternating rounds, client and servers pinned with taskset; a loopback TCP
# ping-pong and bulk floor (tcp_bench) is measured in the same rounds.
# Prints a table (medians over the rounds) with the ratios, writes
# OUT/compare.txt, OUT/compare.tsv, OUT/rounds.tsv and OUT/compare.png.
#
# Usage: run_compare.sh BUILD_DIR [OUT_DIR]
# The other forwarder (none: Wormhole alone, and the script says so):
#   GVIRTUS_HOME=DIR   a GVirtuS install (bin/gvirtus-backend, lib/frontend/
#                      libcudart.so.13, etc/properties.json). Without an
#                      NVIDIA device (/dev/nvidia0) its backend runs on top of
#                      Wormhole's drop-in libcudart and the sim device
#                      (GVIRTUS_OVER_WORMHOLE=1, the default then).
#   OTHER_LIBDIR=DIR OTHER_SERVER="command"  any forwarder: the command starts
#                      its server (run in the background, pinned), DIR goes
#                      first on the client's LD_LIBRARY_PATH; OTHER_NAME names it.
#                      The command sees WORMHOLE_SOCKET (this run's Wormhole
#                      server), to layer a GPU-less server on Wormhole.
# Knobs: ROUNDS (3) ITERS (20000 null calls) COPIES (5) COPY_MIB (64)
#        ASYNC (20000) CLIENT_CPU (0) SERVER_CPU (1) COMPARE_TRAIN (0: 1 also
#        runs wh-train-legacy through both, step time and loss curves; through
#        GVirtuS it needs GVirtuS's cuBLAS plugin, and kernels run on the
#        backend's device: a GPU, or Wormhole's sim device when layered).
set -u
build="$(cd "$1" && pwd)"
out="${2:-$build/compare}"
here="$(cd "$(dirname "$0")" && pwd)"
mkdir -p "$out"
out="$(cd "$out" && pwd)"
ROUNDS=${ROUNDS:-3}; ITERS=${ITERS:-20000}; COPIES=${COPIES:-5}; COPY_MIB=${COPY_MIB:-64}
ASYNC=${ASYNC:-20000}; CCPU=${CLIENT_CPU:-0}; SCPU=${SERVER_CPU:-1}
bench="$build/tests/compare/compare_bench"
tcpb="$build/tests/compare/tcp_bench"
for f in "$bench" "$tcpb" "$build/bin/wormhole-server" "$build/guest-lib/libcudart.so.13"; do
  [ -e "$f" ] || { echo "run_compare.sh: missing $f (build the compare targets)" >&2; exit 2; }
done
ncpu=$(nproc)
[ "$CCPU" -lt "$ncpu" ] && [ "$SCPU" -lt "$ncpu" ] || { CCPU=0; SCPU=$(( ncpu > 1 ? 1 : 0 )); }
pin_c="taskset -c $CCPU"; pin_s="taskset -c $SCPU"
tmp=$(mktemp -d /tmp/wh-compare-XXXXXX)
pids=()
cleanup() {
  # The servers and the children they forked (GVirtuS forks one process per
  # client, which outlives its parent), by process id.
  local all=() p c
  for p in "${pids[@]}"; do
    all+=("$p")
    for c in $(ps -o pid= --ppid "$p" 2>/dev/null); do all+=("$c"); done
  done
  for p in "${all[@]}"; do kill -TERM "$p" 2>/dev/null; done
  for _ in $(seq 1 20); do
    local alive=0
    for p in "${all[@]}"; do kill -0 "$p" 2>/dev/null && alive=1; done
    [ $alive -eq 0 ] && break
    sleep 0.1
  done
  for p in "${all[@]}"; do kill -KILL "$p" 2>/dev/null; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null; done
  rm -rf "$tmp"
}
trap cleanup EXIT

# Wormhole's server (sim backend unless WH_BACKEND says otherwise).
sock="$tmp/wh.sock"
$pin_s "$build/bin/wormhole-server" --backend "${WH_BACKEND:-sim}" --socket "$sock" --log-level warn \
  >"$out/wormhole-server.log" 2>&1 &
pids+=($!)
wh_pid=$!
for _ in $(seq 1 200); do [ -S "$sock" ] && break; sleep 0.05; done
[ -S "$sock" ] || { echo "FAIL: wormhole-server did not start"; cat "$out/wormhole-server.log"; exit 3; }

# The other forwarder.
other=""; other_env=(); other_note=""; layered=0
if [ -n "${GVIRTUS_HOME:-}" ]; then
  other=${OTHER_NAME:-GVirtuS}
  [ -x "$GVIRTUS_HOME/bin/gvirtus-backend" ] || { echo "FAIL: no $GVIRTUS_HOME/bin/gvirtus-backend"; exit 2; }
  port=${GVIRTUS_PORT:-$(( 20000 + RANDOM % 20000 ))}
  plugins='"cudart"'
  [ -e "$GVIRTUS_HOME/lib/libgvirtus-plugin-cublas.so" ] && plugins='"cudart", "cublas"'

  cat >"$tmp/gvirtus.json" <<JSON
{ "communicator": [ { "endpoint": { "suite": "tcp/ip", "protocol": "tcp",
    "server_address": "127.0.0.1", "port": "$port" }, "plugins": [ $plugins ] } ],
  "secure_application": false }
JSON
  over=${GVIRTUS_OVER_WORMHOLE:-$([ -e /dev/nvidia0 ] && echo 0 || echo 1)}
  bl="$GVIRTUS_HOME/lib"
  if [ "$over" = 1 ]; then
    bl="$build/guest-lib:$bl"
    other_note="GVirtuS backend runs on Wormhole's drop-in libcudart (sim device): its figures include one Wormhole hop, measured alone in the Wormhole column; during GVirtuS rounds wormhole-server moves to CPU $CCPU (the client sleeps in recv) so that it does not share a CPU with the GVirtuS backend"
    layered=1
  fi
  WORMHOLE_SOCKET="$sock" GVIRTUS_HOME="$GVIRTUS_HOME" LD_LIBRARY_PATH="$bl${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
    $pin_s "$GVIRTUS_HOME/bin/gvirtus-backend" "$tmp/gvirtus.json" >"$out/other-server.log" 2>&1 &
  pids+=($!)
  for _ in $(seq 1 100); do
    (exec 3<>/dev/tcp/127.0.0.1/$port) 2>/dev/null && break
    kill -0 "${pids[-1]}" 2>/dev/null || break
    sleep 0.1
  done
  kill -0 "${pids[-1]}" 2>/dev/null || { echo "FAIL: gvirtus-backend exited:"; tail -20 "$out/other-server.log"; exit 3; }
  other_env=(GVIRTUS_HOME="$GVIRTUS_HOME" GVIRTUS_CONFIG="$tmp/gvirtus.json"
             LD_LIBRARY_PATH="$GVIRTUS_HOME/lib/frontend:$GVIRTUS_HOME/lib")
elif [ -n "${OTHER_LIBDIR:-}" ] && [ -n "${OTHER_SERVER:-}" ]; then
  other=${OTHER_NAME:-other}
  WORMHOLE_SOCKET="$sock" bash -c "exec $pin_s $OTHER_SERVER" >"$out/other-server.log" 2>&1 &
  pids+=($!)
  sleep "${OTHER_START_WAIT:-2}"
  kill -0 "${pids[-1]}" 2>/dev/null || { echo "FAIL: OTHER_SERVER exited:"; tail -20 "$out/other-server.log"; exit 3; }
  other_env=(LD_LIBRARY_PATH="$OTHER_LIBDIR${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}")
fi

args=(--iters "$ITERS" --copies "$COPIES" --async "$ASYNC" --copy-mib "$COPY_MIB" --cpu "$CCPU")
keys="null_p50_ns null_p99_ns malloc_free_p50_ns h2d_pageable_gbs d2h_pageable_gbs h2d_pinned_gbs d2h_pinned_gbs async_per_s"
tkeys="tcp_rtt_p50_ns tcp_rtt_p99_ns tcp_bulk_up_gbs tcp_bulk_down_gbs"
: >"$out/rounds.tsv"
fail=0
record() {  # record SIDE ROUND FILE
  local k v
  for k in $keys $tkeys byte_check async_check; do
    v=$(sed -n "s/^$k=//p" "$3" | tail -1)
    [ -n "$v" ] && printf '%s\t%s\t%s\t%s\n' "$1" "$2" "$k" "$v" >>"$out/rounds.tsv"
  done
}
echo "bench-compare: $ROUNDS rounds, client on CPU $CCPU, servers on CPU $SCPU; ${COPY_MIB} MiB copies; $(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg)"
[ -z "$other" ] && echo "No second forwarder given (GVIRTUS_HOME or OTHER_LIBDIR+OTHER_SERVER): Wormhole alone."
[ -n "$other_note" ] && echo "Note: $other_note."
for r in $(seq 1 "$ROUNDS"); do
  f="$tmp/wh-$r.txt"
  WORMHOLE_SOCKET="$sock" LD_LIBRARY_PATH="$build/guest-lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
    $pin_c "$bench" "${args[@]}" >"$f" 2>"$tmp/wh-$r.err"
  rc=$?
  if [ $rc -ne 0 ] || ! grep -q '^byte_check=ok' "$f" || ! grep -q '^async_check=ok' "$f"; then
    echo "FAIL: Wormhole round $r (exit $rc):"; cat "$f" "$tmp/wh-$r.err"; fail=1
  fi
  record wormhole "$r" "$f"
  f="$tmp/tcp-$r.txt"
  "$tcpb" --iters "$ITERS" --bulk $(( COPY_MIB << 20 )) --rounds "$COPIES" --client-cpu "$CCPU" --server-cpu "$SCPU" >"$f" 2>&1 \
    || { echo "FAIL: tcp_bench round $r"; cat "$f"; fail=1; }
  record tcp "$r" "$f"
  if [ -n "$other" ]; then
    f="$tmp/other-$r.txt"
    [ $layered = 1 ] && taskset -a -p -c "$CCPU" "$wh_pid" >/dev/null
    env "${other_env[@]}" $pin_c timeout "${OTHER_TIMEOUT:-600}" "$bench" "${args[@]}" >"$f" 2>"$tmp/other-$r.err"
    rc=$?
    [ $layered = 1 ] && taskset -a -p -c "$SCPU" "$wh_pid" >/dev/null
    cp "$tmp/other-$r.err" "$out/other-client-$r.log"
    if ! grep -q '^async_check=' "$f"; then
      echo "$other round $r: did not finish (exit $rc); partial figures kept:"; cat "$f"; tail -3 "$tmp/other-$r.err"
    elif [ $rc -ne 0 ]; then
      echo "$other round $r: all figures out, then exit status $rc (a crash at exit: $(grep -c . "$tmp/other-$r.err") lines on stderr)"
    fi
    record other "$r" "$f"
  fi
  echo "round $r done"
done

# Medians over rounds; the table and the ratios.
awk -F'\t' -v other="$other" -v keys="$keys" -v tkeys="$tkeys" '
  { v[$1 SUBSEP $3] = v[$1 SUBSEP $3] " " $4 }
  function med(s,   a, n, i, j, t) {
    n = split(s, a, " "); if (n == 0) return ""
    for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] + 0 < a[i] + 0) { t = a[i]; a[i] = a[j]; a[j] = t }
    t = (n % 2) ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
    return (t >= 1000) ? sprintf("%.0f", t) : sprintf("%.4g", t)
  }
  END {
    nk = split(keys, K, " "); split(tkeys, T, " ")
    floor["null_p50_ns"] = "tcp_rtt_p50_ns"; floor["null_p99_ns"] = "tcp_rtt_p99_ns"
    floor["h2d_pageable_gbs"] = "tcp_bulk_up_gbs"; floor["h2d_pinned_gbs"] = "tcp_bulk_up_gbs"
    floor["d2h_pageable_gbs"] = "tcp_bulk_down_gbs"; floor["d2h_pinned_gbs"] = "tcp_bulk_down_gbs"
    oname = other == "" ? "-" : other
    printf "%-20s %14s %14s %14s %12s %12s\n", "metric", "wormhole", oname, "tcp_floor", oname "/wh", oname "/tcp"
    for (i = 1; i <= nk; i++) {
      k = K[i]; w = med(v["wormhole" SUBSEP k]); o = med(v["other" SUBSEP k])
      t = (k in floor) ? med(v["tcp" SUBSEP floor[k]]) : ""
      r1 = (o != "" && w + 0 > 0) ? sprintf("%.3g", o / w) : "-"
      r2 = (o != "" && t != "" && t + 0 > 0) ? sprintf("%.3g", o / t) : "-"
      printf "%-20s %14s %14s %14s %12s %12s\n", k, w, (o == "" ? "-" : o), (t == "" ? "-" : t), r1, r2
      printf "%s\t%s\t%s\t%s\n", k, w, (o == "" ? "nan" : o), (t == "" ? "nan" : t) > "/dev/stderr"
    }
  }' "$out/rounds.tsv" >"$out/compare.txt" 2>"$out/compare.tsv"
echo
cat "$out/compare.txt"
echo "(latencies in ns, bandwidths in 1e9 bytes/s, async in calls/s; medians over $ROUNDS rounds)"
wh_bytes=$(awk -F'\t' '$1=="wormhole" && $3=="byte_check" && $4=="ok"' "$out/rounds.tsv" | wc -l)
echo "byte_check: Wormhole $wh_bytes/$ROUNDS rounds ok"
[ "$wh_bytes" -eq "$ROUNDS" ] || fail=1

# The plot: latencies and bandwidths, log scale, one bar per side.
if command -v gnuplot >/dev/null; then
  awk -F'\t' '$1 ~ /_ns$/' "$out/compare.tsv" >"$tmp/lat.tsv"
  awk -F'\t' '$1 ~ /_gbs$/' "$out/compare.tsv" >"$tmp/bw.tsv"
  gnuplot <<GP 2>"$tmp/gnuplot.err" || { echo "gnuplot failed:"; cat "$tmp/gnuplot.err"; }
set terminal pngcairo size 1200,500 noenhanced
set output "$out/compare.png"
set multiplot layout 1,2 title "Wormhole vs ${other:-(no second forwarder)} vs loopback TCP ($(nproc) CPUs, load $(cut -d' ' -f1 /proc/loadavg))"
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.8 border -1
set logscale y
set xtics rotate by -20
set grid ytics
set datafile missing "nan"
set title "latency (ns, lower is better)"
plot "$tmp/lat.tsv" using 2:xtic(1) title "wormhole", "" using 3 title "${other:-other}", "" using 4 title "tcp floor"
set title "${COPY_MIB} MiB copies (GB/s, higher is better)"
plot "$tmp/bw.tsv" using 2:xtic(1) title "wormhole", "" using 3 title "${other:-other}", "" using 4 title "tcp floor"
unset multiplot
GP
  [ -s "$out/compare.png" ] && echo "plot: $out/compare.png"
else
  echo "plot skipped: gnuplot not installed (scripts/deps.sh compare)"
fi

# Optional: the training program (legacy launch form) through both.
if [ "${COMPARE_TRAIN:-0}" = 1 ]; then
  prog="$build/tests/train/wh-train-legacy"
  targs=(--epochs 1 --batch 100 --subset "${TRAIN_SUBSET:-5000}" --test-subset 1000 --seed 42 --no-progress)
  echo "--- training (wh-train-legacy ${targs[*]})"
  WORMHOLE_SOCKET="$sock" LD_LIBRARY_PATH="$build/guest-lib" $pin_c "$prog" "${targs[@]}" \
    --loss-out "$out/loss-wormhole.txt" >"$out/train-wormhole.txt" 2>&1
  echo "wormhole: exit $?; $(grep -E '^final' "$out/train-wormhole.txt")"
  if [ -n "$other" ]; then
    if [ -n "${GVIRTUS_HOME:-}" ] && ! ls "$GVIRTUS_HOME"/lib/frontend/libcublas.so* >/dev/null 2>&1; then
      echo "$other: skipped: wh-train needs GVirtuS's cuBLAS plugin ($GVIRTUS_HOME/lib/frontend/libcublas.so.13), not installed"
    else
      env "${other_env[@]}" $pin_c timeout "${OTHER_TRAIN_TIMEOUT:-300}" "$prog" "${targs[@]}" --loss-out "$out/loss-other.txt" \
        >"$out/train-other.txt" 2>&1
      echo "$other: exit $?; $(grep -E '^final' "$out/train-other.txt")"
      [ -s "$out/loss-other.txt" ] && paste "$out/loss-wormhole.txt" "$out/loss-other.txt" >"$out/loss-side-by-side.txt" \
        && echo "loss curves: $out/loss-side-by-side.txt"
    fi
  fi
fi
[ $fail -eq 0 ] && echo "bench-compare: OK" || echo "bench-compare: FAILED"
exit $fail
