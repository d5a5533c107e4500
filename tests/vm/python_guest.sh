#!/bin/bash
# python_guest.sh <wormhole-server> <image> <workdir> <source-dir> <build-dir>
# Runs a user's Numba program (tests/python/numba_example.py) and a reduced,
# named set of the CuPy tests (tests/cupy/test_cupy.py) inside a TCG
# guest (jobs/python.sh), forwarded through the VM's ivshmem region to a
# sim-device server on the host. The guest reads the host's files through
# a read-only 9p share. Exits 77 (skipped) when the Python environments
# cannot be built (no package index), as the host's Python tests do.
set -u
server=$1 image=$2 workdir=$3 src=$4 build=$5
venv=$("$src/scripts/python-env.sh") || exit $?
cupy_venv=$("$src/tests/cupy/cupy-env.sh") || exit $?
mkdir -p "$workdir"
exec "$src/vm/run-vms.sh" --image "$image" --workdir "$workdir" --shm-size 512 --mem 2048 --timeout 840 \
  --host "$server --backend sim --vm-channels 4 --heartbeat-timeout-ms 5000 --socket $workdir/py.sock \$WH_SERVER_VM_ARGS" \
  --vm a --job-name python --expect numba_example,cupy_reduced \
  --env "WH_VENV=$venv" --env "WH_CUPY_VENV=$cupy_venv" --env "WH_SRC=$src" --env "WH_BUILD=$build" \
  --qemu-arg -virtfs --qemu-arg "local,path=/,mount_tag=host,security_model=none,readonly=on,multidevs=remap"
