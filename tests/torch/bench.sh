#!/bin/bash
# make bench-torch: tests/torch/bench.sh BUILD
# Each model (a compiled x + y on 1,000 floats, an MLP and a CNN training
# step) through Wormhole on a private sim-device server, then on torch's CPU
# device, in one run. The server's statistics (wormholectl) over the timed
# calls or steps give the calls per step, how many are posted and the sim
# device's kernel time. Two lines per model, device=cuda and device=cpu:
#   <what> device=.. n=.. first_s=.. per_ms=.. [calls_per=.. posted_per=.. kernel_ms_per=..]
set -u
build=$(cd "$1" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
env=$("$here/torch-env.sh") || exit $?
dir=$(mktemp -d /tmp/wh-torch-bench.XXXXXX)
sock="$dir/s.sock"
"$build/bin/wormhole-server" --backend sim --socket "$sock" --no-stats >"$dir/server.log" 2>&1 &
spid=$!
trap 'kill $spid 2>/dev/null; wait $spid 2>/dev/null; rm -rf "$dir"' EXIT
for _ in $(seq 1 100); do [ -S "$sock" ] && break; sleep 0.1; done
# Triton's and Inductor's caches of this run: every kernel is compiled (and
# passes through wormhole-ptxas), as in the tests.
export TRITON_CACHE_DIR="$dir/triton" TORCHINDUCTOR_CACHE_DIR="$dir/inductor"
export WH_BENCH_CTL="$build/bin/wormholectl --socket $sock"
for what in op mlp cnn; do
  case $what in op) n=2000 ;; mlp) n=50 ;; *) n=20 ;; esac
  "$build/bin/wormhole-run" --socket "$sock" "$env/bin/python" "$here/bench.py" $what cuda $n | tail -n 1
  "$env/bin/python" "$here/bench.py" $what cpu $n | tail -n 1
done
