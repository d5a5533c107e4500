#!/bin/bash
# make bench-train-vm: the training steps of make bench-train (MLP, CNN,
# GPT) run inside one guest (TCG unless WORMHOLE_ACCEL=kvm; one vCPU),
# forwarded over its ivshmem region to a wormhole-server on the sim backend
# on the host; then the same steps from a host process (tests/train/bench.sh
# with the sim backend) for comparison. Ends with exactly one line:
#   vm_mlp_step_ms=.. host_mlp_step_ms=.. vm_cnn_step_ms=.. host_cnn_step_ms=.. vm_gpt_step_ms=.. host_gpt_step_ms=.. accel=<tcg|kvm>
# (docs/benchmarks.md).
# Usage: bench_vm.sh <build-dir> <guest image dir>   (env BENCH_STEPS, BENCH_WARMUP: every model)
set -euo pipefail
build="$(cd "$1" && pwd)"; image="$2"
src="$(cd "$(dirname "$0")/../.." && pwd)"
work="$build/vm/bench-train"
rm -rf "$work"; mkdir -p "$work"
steps=${BENCH_STEPS:-}; warm=${BENCH_WARMUP:-}
data="--subset 20000 --test-subset 1000 --data /data/fashion-mnist"
cat >"$work/job.sh" <<EOF
wh_bench mlp wh-train --steps ${steps:-100} --warmup ${warm:-10} --batch 128 $data
wh_bench cnn wh-cnn --steps ${steps:-100} --warmup ${warm:-10} --batch 64 $data
wh_bench gpt wh-gpt --bench ${steps:-20} --bench-warmup ${warm:-3}
wh_exit
EOF
set +e
out=$("$src/vm/run-vms.sh" --image "$image" --workdir "$work/vm" --timeout 600 --shm-size 512 --mem 1024 \
      --host "$build/bin/wormhole-server --backend sim --no-stats --vm-channels 1 --socket $work/server.sock \$WH_SERVER_VM_ARGS" \
      --vm bench --job "$work/job.sh" --expect mlp,cnn,gpt 2>&1)
rc=$?
set -e
echo "$out" >&2
[ $rc -eq 0 ] || { echo "bench-train-vm: the guest run failed (logs in $work/vm)" >&2; exit 1; }
accel=$(sed -n 's/^launch: bench PASS (.*, \([a-z]*\)) log .*/\1/p' <<<"$out")
host=$(BENCH_BACKEND=sim BENCH_STEPS=${steps} BENCH_WARMUP=${warm} "$src/tests/train/bench.sh" "$build" mlp cnn gpt) || { echo "bench-train-vm: the host run failed" >&2; exit 1; }
echo "$host" | sed 's/^/host: /' >&2
line=""
for m in mlp cnn gpt; do
  l=$(grep "^bench: WH-BENCH $m " <<<"$out" | tail -1)
  ms=$(sed -n 's/.*step_ms=\([0-9.]*\).*/\1/p' <<<"$l")
  calls=$(sed -n 's/.*calls_per_step=\([0-9]*\).*/\1/p' <<<"$l")
  [ -n "$ms" ] || { echo "bench-train-vm: no step_ms from $m" >&2; exit 1; }
  sps=$(awk -v ms="$ms" 'BEGIN { printf "%.1f", (ms > 0 ? 1000 / ms : 0) }')
  hms=$(sed -n "s/^${m}_step_ms=\([0-9.]*\).*/\1/p" <<<"$host")
  line+="vm_${m}_step_ms=$ms host_${m}_step_ms=${hms:-NA} vm_${m}_steps_per_s=$sps calls_per_step=$calls "
done
echo "${line}accel=${accel:-?}"
