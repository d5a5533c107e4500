#!/bin/bash
# Migration figures (docs/benchmarks.md "Migration"): for sessions holding
# 64 MiB .. N MiB of device memory (incompressible), the pause of a live
# move between two local sim servers (as the source logs it: from the
# pause to the destination serving), the size of the same session's
# checkpoint file, and a stand-in training step's time before and after.
# Usage: bench_migrate.sh <build-dir> [MiB...]   (default: 64 256 1024 2048)
set -u
build="$1"; shift
sizes=${*:-64 256 1024 2048}
ctl="$build/bin/wormholectl"
prog="$build/tests/server/programs/migrate_bench"
dir=$(mktemp -d /tmp/wh-migbench-XXXXXX)
pids=()
trap 'for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done; wait 2>/dev/null; rm -rf "$dir"' EXIT
for name in a b; do
  "$build/bin/wormhole-server" --backend sim --socket "$dir/$name.sock" --log-level info >"$dir/$name.log" 2>&1 &
  pids+=($!)
done
for _ in $(seq 1 100); do [ -S "$dir/b-admin.sock" ] && [ -S "$dir/a-admin.sock" ] && break; sleep 0.05; done
printf "%8s %12s %14s %12s %14s %14s\n" "MiB" "pause_ms" "wormholectl_ms" "file_MiB" "step_ms_before" "step_ms_after"
for mib in $sizes; do
  rm -f "$dir/go" "$dir/s.ckpt"
  WORMHOLE_SOCKET="$dir/a.sock" LD_LIBRARY_PATH="$build/guest-lib" "$prog" "$mib" "$dir/go" >"$dir/out.txt" 2>&1 &
  p=$!
  for _ in $(seq 1 2400); do grep -q READY "$dir/out.txt" 2>/dev/null && break; sleep 0.05; done
  sleep 1
  sid=$("$ctl" --socket "$dir/a.sock" --json sessions | python3 -c 'import json,sys; print(json.load(sys.stdin)["sessions"][0]["id"])')
  moved=$("$ctl" --socket "$dir/a.sock" --json migrate "$sid" --to "$dir/b.sock")
  new=$(echo "$moved" | python3 -c 'import json,sys; print(json.load(sys.stdin)["new_session"])')
  ms=$(echo "$moved" | python3 -c 'import json,sys; print("%.0f" % json.load(sys.stdin)["ms"])')
  pause=$(grep "session $sid: migrated" "$dir/a.log" | tail -1 | sed -n 's/.*paused \([0-9.]*\) ms.*/\1/p')
  "$ctl" --socket "$dir/b.sock" checkpoint "$new" "$dir/s.ckpt" >/dev/null && "$ctl" --socket "$dir/b.sock" resume "$new" >/dev/null
  fsz=$(stat -c %s "$dir/s.ckpt" 2>/dev/null || echo 0)
  touch "$dir/go"
  wait $p || { echo "the client failed:"; cat "$dir/out.txt"; exit 1; }
  read -r before after < <(sed -n 's/^step_ms before \([0-9.]*\) .* after \([0-9.]*\)/\1 \2/p' "$dir/out.txt")
  grep "session $sid: migrated" "$dir/a.log" | sed "s/.*: migrated/  migrated/" >>"$dir/detail.txt"
  grep "session $new: checkpoint read" "$dir/b.log" | tail -1 | sed "s/.*session $new: checkpoint/    there: checkpoint/" >>"$dir/detail.txt"
  printf "%8s %12s %14s %12.1f %14s %14s\n" "$mib" "$pause" "$ms" "$(echo "$fsz / 1048576" | bc -l)" "$before" "$after"
done
echo "the source's account of each move, and the destination's:"; cat "$dir/detail.txt"
