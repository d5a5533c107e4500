#!/usr/bin/env bash
# make bench-report: runs the benchmarks one after the other on the current
# build, collects each one's summary line into BUILD/bench/report.txt and
# draws BUILD/bench/latency.png and BUILD/bench/bandwidth.png (gnuplot).
# Usage: scripts/bench_report.sh BUILD [SUITE...]
#   suites: ring forward graph ptx train (default: all five); vm and train-vm
#   (they boot a guest) are run only when named.
set -uo pipefail
BUILD=${1:?usage: bench_report.sh BUILD [SUITE...]}; shift
SUITES=("$@"); ((${#SUITES[@]})) || SUITES=(ring forward graph ptx train)
OUTDIR=$BUILD/bench; mkdir -p "$OUTDIR"
REPORT=$OUTDIR/report.txt
: >"$REPORT"
{
  echo "# $(date -u +%FT%TZ) $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
  echo "# $(nproc) CPUs, $(sed -n 's/^model name\s*: //p' /proc/cpuinfo | head -1), load $(cut -d' ' -f1-3 /proc/loadavg)"
} >>"$REPORT"

run() {  # NAME PATTERN COMMAND...: keeps the last line matching PATTERN
  local name=$1 pat=$2; shift 2   # (EACH=1: the last one of each first key, e.g. one per model)
  echo "== $name: $*" >&2
  local log=$OUTDIR/$name.log
  if "$@" >"$log" 2>&1; then
    local lines
    if [ "${EACH:-0}" = 1 ]; then
      lines=$(grep -E "$pat" "$log" | awk '{ k = $1; sub(/=.*/, "", k); if (!(k in last)) order[++n] = k; last[k] = $0 }
                                           END { for (i = 1; i <= n; i++) print last[order[i]] }')
    else
      lines=$(grep -E "$pat" "$log" | tail -1)
    fi
    if [ -n "$lines" ]; then sed "s/^/$name /" <<<"$lines" >>"$REPORT"; echo "$lines" >&2; return; fi
  fi
  echo "$name FAILED (see $log)" >>"$REPORT"; tail -5 "$log" >&2
}

for s in "${SUITES[@]}"; do
  case $s in
    ring)    run ring '^ring_rtt_p50_ns=' make --no-print-directory bench-ring BUILD="$BUILD" ;;
    forward) run forward '^null_call_rtt_p50_ns=' make --no-print-directory bench-forward BUILD="$BUILD" ;;
    graph)   run graph 'kernels/s' make --no-print-directory bench-graph BUILD="$BUILD" ;;
    ptx)     run ptx '^ptx_thread_instr_per_s' make --no-print-directory bench-ptx BUILD="$BUILD" ;;
    train)   EACH=1 run train '^(mlp|cnn|gpt)_step_ms=' make --no-print-directory bench-train BUILD="$BUILD" ;;
    vm)      run vm '^vm_null_call_rtt_p50_ns=' make --no-print-directory bench-vm BUILD="$BUILD" ;;
    train-vm) run train-vm '^vm_mlp_step_ms=' make --no-print-directory bench-train-vm BUILD="$BUILD" ;;
    *) echo "bench_report.sh: unknown suite '$s'" >&2; exit 2 ;;
  esac
done

# key=value lookup in the report
val() { sed -n "s/.*\b$1=\([0-9.e+]*\).*/\1/p" "$REPORT" | head -1; }

if command -v gnuplot >/dev/null; then
  lat=$OUTDIR/latency.dat; bw=$OUTDIR/bandwidth.dat
  : >"$lat"; : >"$bw"
  for kv in "cache-line_floor:bare_rtt_p50_ns" "ring_round_trip:ring_rtt_p50_ns" \
            "forwarded_null_call:null_call_rtt_p50_ns" "null_call_from_TCG_guest:vm_null_call_rtt_p50_ns" \
            "loopback_TCP_round_trip:tcp_rtt_p50_ns"; do
    v=$(val "${kv#*:}"); [ -n "$v" ] && echo "\"${kv%%:*}\" $v" | tr _ ' ' >>"$lat"
  done
  for kv in "memcpy:memcpy_gb_s" "H2D_pinned:h2d_pinned_gb_s" "D2H_pinned:d2h_pinned_gb_s" \
            "H2D_pageable:h2d_pageable_gb_s"; do
    v=$(val "${kv#*:}"); [ -n "$v" ] && echo "\"${kv%%:*}\" $v" | tr _ ' ' >>"$bw"
  done
  plot() {  # DATA PNG TITLE YLABEL LOGSCALE
    [ -s "$1" ] || return 0
    gnuplot <<GP
set terminal pngcairo size 900,420 font ",10"
set output "$2"
set title "$3"
set ylabel "$4"
set style fill solid 0.7
set boxwidth 0.6
set grid ytics
set yrange [${6:-0}:*]
$5
set xtics rotate by -20
plot "$1" using 0:2:xtic(1) with boxes notitle, "" using 0:2:(sprintf("%g",\$2)) with labels offset 0,0.7 notitle
GP
  }
  plot "$lat" "$OUTDIR/latency.png" "Round trip, p50 (one run)" "ns (log scale)" "set logscale y" 10
  plot "$bw" "$OUTDIR/bandwidth.png" "64 MiB copies through the ring (one run)" "GB/s" ""
fi
echo "== report: $REPORT" >&2
cat "$REPORT"
