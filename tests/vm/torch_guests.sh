#!/bin/bash
# torch_guests.sh <wormhole-server> <image> <workdir> <source-dir> <build-dir>
# PyTorch training (tests/torch/train_check.py: an MLP with SGD and AdamW,
# 100 steps of a CNN on Fashion-MNIST, each checked against torch's CPU
# device) in two TCG guests at once, both forwarded through their VMs'
# ivshmem regions to one sim-device server on the host. The script runs on
# the host first, through a private server: it must pass there too, and it
# fills the Inductor and Triton caches the guests start from. Both guests'
# MLP runs must be identical (check-same.sh); the CNN's steps need not be:
# Inductor's max-pooling backward kernel adds with atomics, in no fixed
# order. Exits 77
# (skipped) when the PyTorch environment cannot be built (no package index),
# as the host's torch tests do.
set -u
server=$1 image=$2 workdir=$3 src=$4 build=$5
venv=$("$src/tests/torch/torch-env.sh") || exit $?
rm -rf "$workdir" && mkdir -p "$workdir"
cache=$workdir/cache
"$server" --backend sim --socket "$workdir/host.sock" --admin-socket off --no-stats >"$workdir/host-server.log" 2>&1 &
spid=$!
for _ in $(seq 100); do [ -S "$workdir/host.sock" ] && break; sleep 0.1; done
TRITON_CACHE_DIR=$cache/triton TORCHINDUCTOR_CACHE_DIR=$cache/inductor \
  "$build/bin/wormhole-run" --lib-dir "$build/guest-lib" --socket "$workdir/host.sock" \
  "$venv/bin/python" "$src/tests/torch/train_check.py" >"$workdir/host-run.log" 2>&1
rc=$?
kill $spid; wait $spid 2>/dev/null
grep -E "^(ok|FAIL)" "$workdir/host-run.log" | sed 's/^/host: /'
if [ $rc -ne 0 ]; then
  echo "FAIL: the host's run (rc=$rc):"; tail -30 "$workdir/host-run.log"; exit 1
fi
per_vm=(--job-name torch --expect torch_train
        --env "WH_VENV=$venv" --env "WH_SRC=$src" --env "WH_BUILD=$build" --env "WH_TORCH_CACHE=$cache"
        --qemu-arg -virtfs --qemu-arg "local,path=/,mount_tag=host,security_model=none,readonly=on,multidevs=remap")
exec "$src/vm/run-vms.sh" --image "$image" --workdir "$workdir/vms" --shm-size 512 --mem 4096 --timeout 1500 \
  --host "$server --backend sim --vm-channels 4 --heartbeat-timeout-ms 5000 --socket $workdir/vms.sock \$WH_SERVER_VM_ARGS" \
  --host-check "$src/tests/vm/check-same.sh torch_train 'MLP, [^:]+: 5 losses within [^ ]+ relative of the CPU.s \\([0-9.]+ -> [0-9.]+;'" \
  --vm a "${per_vm[@]}" --vm b "${per_vm[@]}"
