#!/bin/bash
# Live migration between two local servers (wormholectl migrate,
# docs/migration.md), checked the way an operator would use it:
#  1. wh-train (MLP, cuBLAS + own kernels) and wh-cnn (cuDNN, cuBLAS, own
#     kernels) moved mid-epoch A -> B and back B -> A: their per-step losses
#     are bit-identical to an unmoved run's, and their accuracy the same;
#     wh-gpt (bf16, cuBLASLt) moved A -> B has the losses of an unmoved run.
#     Before the first move, three moves that must fail and leave the session
#     running on A: to a server that does not exist, to one whose quota is
#     smaller than the session's memory, and to one killed half-way (after it
#     took the session's descriptors, before it answered).
#  2. migrate_probe: device memory, module variables, __managed__ and
#     managed memory, streams, events, an executable graph, a memory pool
#     and its memory, a CUDA array with texture and surface objects,
#     cuBLAS/cuFFT/cuRAND handles, blocks of the device-side malloc heap,
#     unfetched printf text and 300 MiB of pinned memory grown past the data
#     area, checked by the program after the move.
#  3. the same program checkpointed to a file, its server killed (-9), a
#     new server restoring the file: the client resumes, handing back its
#     grown pinned memory (the file holds only where it was), and passes.
#  4. wh-train checkpointed to a file, its server killed (-9), a new server
#     started on the same socket restores the file and the client resumes:
#     losses bit-identical to the unmoved run. Truncated and corrupt files
#     are refused, and another process presenting the session's token too.
#  5. a held session refuses a move and goes on where it is after
#     `wormholectl resume`.
#  6. a session of the cuda backend (stacked over Wormhole's own driver onto
#     server B) is refused by name and the program (stop_resume) passes there.
# Usage: migrate.sh <build-dir> <wh-train> <wh-cnn> <migrate_probe>
set -u
build="$1"; train="$2"; cnn="$3"; probe="$4"
ctl="$build/bin/wormholectl"
dir=$(mktemp -d /tmp/wh-migrate-XXXXXX)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
  wait 2>/dev/null
  rm -rf "$dir"
}
trap cleanup EXIT
fail() {
  echo "FAIL: $*"
  for f in "$dir"/*.log; do echo "--- $f"; tail -30 "$f"; done
  exit 1
}
start_server() {  # name [options]
  local name="$1"; shift
  rm -f "$dir/$name.sock" "$dir/$name-admin.sock"  # a killed server's
  "$build/bin/wormhole-server" --backend sim --socket "$dir/$name.sock" --log-level info "$@" >"$dir/$name.log" 2>&1 &
  pids+=($!)
  for _ in $(seq 1 100); do [ -S "$dir/$name.sock" ] && [ -S "$dir/$name-admin.sock" ] && return 0; sleep 0.05; done
  fail "server $name did not start"
}
# The id of the only session of server $1 once it has made $2 calls (0: any).
session_after() {
  for _ in $(seq 1 600); do
    local line
    line=$("$ctl" --socket "$dir/$1.sock" --json sessions 2>/dev/null |
           python3 -c 'import json,sys; s=json.load(sys.stdin)["sessions"]; print("%d %d" % (s[0]["id"], s[0]["calls"]) if s else "")')
    if [ -n "$line" ] && [ "${line#* }" -ge "$2" ]; then echo "${line% *}"; return 0; fi
    sleep 0.05
  done
  return 1
}
run_guest() {  # server out-file program args...
  local sock="$dir/$1.sock" out="$2"; shift 2
  WORMHOLE_SOCKET="$sock" WORMHOLE_RESUME_TIMEOUT_S=60 LD_LIBRARY_PATH="$build/guest-lib" "$@" >"$out" 2>&1
}
# refused_then_goes_on SERVER OUT PASS WHAT "CTL-ARGS" PROGRAM ARGS...: runs the
# program (it prints READY, then waits for $dir/go) on SERVER; `wormholectl
# CTL-ARGS` (SID: its session) must fail naming WHAT; then the program must
# finish there, printing "PASS PASS".
refused_then_goes_on() {
  local server="$1" out="$2" pass="$3" what="$4" args="$5"; shift 5
  rm -f "$dir/go"
  run_guest "$server" "$out" "$@" &
  local prog=$! sid
  for _ in $(seq 1 600); do grep -q READY "$out" 2>/dev/null && break; sleep 0.05; done
  sid=$(session_after "$server" 0) || fail "no session on $server"
  # shellcheck disable=SC2086  # CTL-ARGS are words without spaces
  if "$ctl" --socket "$dir/$server.sock" ${args//SID/$sid} >"$dir/m.txt" 2>&1; then fail "$args succeeded ($what)"; fi
  grep -q "$what" "$dir/m.txt" || fail "the refusal does not name $what: $(cat "$dir/m.txt")"
  echo "refused: $(cat "$dir/m.txt")"
  touch "$dir/go"
  wait $prog || fail "the refused session did not go on: $(cat "$out")"
  grep -q "PASS $pass" "$out" || fail "after the refusal: $(cat "$out")"
}

start_server a
a_pid=${pids[-1]}
start_server b
start_server small --quota-mb 4
start_server doomed
doomed_pid=${pids[-1]}

# A training run unmoved, then the same run moved A -> B -> A mid-epoch:
# per-step losses bit-identical, the same accuracy. Before the first move
# (when $check_refusals), three moves that must fail and change nothing.
moved_run() {  # name calls-before-first-move program args...
  local name="$1" calls="$2"; shift 2
  echo "=== 1. $name: unmoved, then moved A -> B -> A mid-epoch"
  run_guest a "$dir/$name-ref.out" "$@" --loss-out "$dir/$name-loss-ref.txt" || fail "$name reference run"
  run_guest a "$dir/$name-moved.out" "$@" --loss-out "$dir/$name-loss-moved.txt" &
  local prog=$! sid sid_b
  sid=$(session_after a "$calls") || fail "no $name session on A"
  if [ "$check_refusals" = 1 ]; then
    if "$ctl" --socket "$dir/a.sock" migrate "$sid" --to "$dir/nowhere.sock" >"$dir/m0.txt" 2>&1; then
      fail "a move to a server that does not exist succeeded"
    fi
    grep -q "cannot reach" "$dir/m0.txt" || fail "move to nowhere: $(cat "$dir/m0.txt")"
    if "$ctl" --socket "$dir/a.sock" migrate "$sid" --to "$dir/small.sock" >"$dir/m1.txt" 2>&1; then
      fail "a move to a server with a 4 MiB quota succeeded"
    fi
    grep -q "free to it here" "$dir/m1.txt" || fail "move to small: $(cat "$dir/m1.txt")"
    # the destination dies half-way: stopped, it has taken the connection and
    # the session's descriptors but not answered when it is killed
    kill -STOP "$doomed_pid"
    "$ctl" --socket "$dir/a.sock" migrate "$sid" --to "$dir/doomed.sock" >"$dir/m4.txt" 2>&1 &
    local mig=$!
    sleep 2
    kill -9 "$doomed_pid"
    if wait $mig; then fail "a move to a server killed during it succeeded"; fi
    grep -q "did not answer" "$dir/m4.txt" || fail "move to a killed server: $(cat "$dir/m4.txt")"
    echo "refused as expected: $(cat "$dir/m0.txt")"
    echo "refused as expected: $(cat "$dir/m1.txt")"
    echo "failed as expected: $(cat "$dir/m4.txt")"
  fi
  "$ctl" --socket "$dir/a.sock" migrate "$sid" --to "$dir/b.sock" | tee "$dir/m2.txt" || fail "$name: move A -> B"
  sid_b=$(sed -n 's/.*: session \([0-9]*\) there.*/\1/p' "$dir/m2.txt")
  [ -n "$sid_b" ] || fail "no session id in: $(cat "$dir/m2.txt")"
  sleep 0.3
  "$ctl" --socket "$dir/b.sock" migrate "$sid_b" --to "$dir/a.sock" | tee "$dir/m3.txt" || fail "$name: move B -> A"
  wait $prog || fail "$name moved run exited $?: $(tail -5 "$dir/$name-moved.out")"
  local steps acc_ref acc_mov
  steps=$(grep -vc '^epoch' "$dir/$name-loss-ref.txt")
  cmp -s "$dir/$name-loss-ref.txt" "$dir/$name-loss-moved.txt" && [ "$steps" -gt 0 ] || {
    diff "$dir/$name-loss-ref.txt" "$dir/$name-loss-moved.txt" | head; fail "$name: losses differ after the moves"; }
  acc_ref=$(sed -n 's/^final test_acc=\([0-9.]*\)%.*/\1/p' "$dir/$name-ref.out")
  acc_mov=$(sed -n 's/^final test_acc=\([0-9.]*\)%.*/\1/p' "$dir/$name-moved.out")
  [ -n "$acc_ref" ] && [ "$acc_ref" = "$acc_mov" ] || fail "$name: accuracy $acc_mov after the moves, $acc_ref unmoved"
  echo "$name: losses bit-identical over $steps steps; test accuracy $acc_mov% both"
}
check_refusals=1 moved_run wh-train 300 "$train" --epochs 1 --batch 128 --seed 42 --subset 40000 --test-subset 2000 \
  --no-progress
check_refusals=0 moved_run wh-cnn 200 "$cnn" --epochs 1 --batch 64 --subset 16000 --test-subset 1000 --no-progress
echo "=== 1b. wh-gpt (bf16, cuBLASLt): unmoved, then moved A -> B after about 40 of its 120 steps"
gpt="$(dirname "$cnn")/wh-gpt"
gargs=(--steps 120 --eval-every 40 --val-batches 1 --sample 0 --seed 1337 --quiet)
run_guest a "$dir/gpt-ref.out" "$gpt" "${gargs[@]}" --loss-log "$dir/gpt-loss-ref.txt" || fail "wh-gpt reference run"
run_guest a "$dir/gpt-moved.out" "$gpt" "${gargs[@]}" --loss-log "$dir/gpt-loss-moved.txt" &
gprog=$!
gsid=$(session_after a 4000) || fail "no wh-gpt session on A"
"$ctl" --socket "$dir/a.sock" migrate "$gsid" --to "$dir/b.sock" || fail "wh-gpt: move A -> B"
wait $gprog || fail "wh-gpt moved run: $(tail -5 "$dir/gpt-moved.out")"
[ "$(grep -c '^step' "$dir/gpt-loss-ref.txt")" = 120 ] && cmp -s "$dir/gpt-loss-ref.txt" "$dir/gpt-loss-moved.txt" || {
  diff "$dir/gpt-loss-ref.txt" "$dir/gpt-loss-moved.txt" | head; fail "wh-gpt: losses differ after the move"; }
echo "wh-gpt: losses identical over 120 steps"
grep -q "migrated to" "$dir/a.log" && grep -q "adopted" "$dir/b.log" && grep -q "adopted" "$dir/a.log" ||
  fail "the servers' logs do not show the moves"
grep -h "migrated to" "$dir/a.log" "$dir/b.log"

echo "=== 2. migrate_probe moved A -> B"
run_guest a "$dir/probe.out" "$probe" "$dir/go" --pinned &
prog=$!
for _ in $(seq 1 600); do grep -q READY "$dir/probe.out" 2>/dev/null && break; sleep 0.05; done
sid=$(session_after a 0) || fail "no probe session"
"$ctl" --socket "$dir/a.sock" migrate "$sid" --to "$dir/b.sock" || fail "probe move"
touch "$dir/go"
wait $prog || fail "probe after the move: $(cat "$dir/probe.out")"
grep -q "probe kernel says 1234" "$dir/probe.out" || fail "printf text lost in the move"
grep -q "PASS migrate_probe" "$dir/probe.out" || fail "probe: $(cat "$dir/probe.out")"
echo "probe: every object checked after the move, 300 MiB of grown pinned memory included"

echo "=== 3. the probe checkpointed to a file, its server killed, restored by a new one: it passes"
rm -f "$dir/go"
run_guest a "$dir/pck.out" "$probe" "$dir/go" --pinned &
prog=$!
for _ in $(seq 1 600); do grep -q READY "$dir/pck.out" 2>/dev/null && break; sleep 0.05; done
sid=$(session_after a 0) || fail "no probe session to checkpoint"
"$ctl" --socket "$dir/a.sock" checkpoint "$sid" "$dir/pinned.ckpt" || fail "checkpoint of the probe"
kill -9 "$a_pid"
start_server a
a_pid=${pids[-1]}
"$ctl" --socket "$dir/a.sock" restore "$dir/pinned.ckpt" || fail "restore of the probe"
touch "$dir/go"
wait $prog || fail "the restored probe: $(cat "$dir/pck.out")"
grep -q "session resumed from its checkpoint" "$dir/pck.out" || fail "the probe did not resume: $(cat "$dir/pck.out")"
grep -q "PASS migrate_probe" "$dir/pck.out" || fail "probe after the restore: $(cat "$dir/pck.out")"
echo "probe: checkpointed with 300 MiB of grown pinned memory ($(stat -c %s "$dir/pinned.ckpt") bytes of file), restored, passed"
echo "=== 4. checkpoint to a file, the server killed, restored by a new one: the program goes on"
run_guest a "$dir/ck.out" "$train" --epochs 1 --batch 128 --seed 42 --subset 40000 --test-subset 2000 --no-progress \
  --loss-out "$dir/loss-ck.txt" &
prog=$!
sid=$(session_after a 300) || fail "no session to checkpoint"
"$ctl" --socket "$dir/a.sock" checkpoint "$sid" "$dir/s.ckpt" || fail "checkpoint"
kill -9 "$a_pid"
sleep 1  # the client's calls wait: its server holds nothing now
start_server a
a_pid=${pids[-1]}
head -c 1000 "$dir/s.ckpt" >"$dir/short.ckpt"
if "$ctl" --socket "$dir/a.sock" restore "$dir/short.ckpt" >"$dir/r0.txt" 2>&1; then fail "a truncated checkpoint was restored"; fi
grep -q "truncated" "$dir/r0.txt" || fail "truncated: $(cat "$dir/r0.txt")"
cp "$dir/s.ckpt" "$dir/flip.ckpt"
printf '\x55' | dd of="$dir/flip.ckpt" bs=1 seek=5000 conv=notrunc status=none
if "$ctl" --socket "$dir/a.sock" restore "$dir/flip.ckpt" >"$dir/r1.txt" 2>&1; then fail "a corrupt checkpoint was restored"; fi
grep -q "corrupt" "$dir/r1.txt" || fail "corrupt: $(cat "$dir/r1.txt")"
echo "refused as expected: $(cat "$dir/r0.txt")"
echo "refused as expected: $(cat "$dir/r1.txt")"
# Another process presenting the token, at a server where the checkpoint
# waits (one the program does not connect to, so it cannot win the race).
"$ctl" --socket "$dir/small.sock" restore "$dir/s.ckpt" >/dev/null || fail "restore on the decoy server"
python3 "$(dirname "$0")/resume_forged.py" "$dir/small.sock" "$dir/s.ckpt" || fail "another process took the session"
"$ctl" --socket "$dir/a.sock" restore "$dir/s.ckpt" || fail "restore"
wait $prog || fail "the restored program exited $?: $(tail -5 "$dir/ck.out")"
grep -q "session resumed from its checkpoint" "$dir/ck.out" || fail "the client did not resume: $(tail "$dir/ck.out")"
cmp -s "$dir/wh-train-loss-ref.txt" "$dir/loss-ck.txt" || {
  diff "$dir/wh-train-loss-ref.txt" "$dir/loss-ck.txt" | head; fail "losses differ after the restore"; }
echo "wh-train checkpointed, its server killed, restored: losses bit-identical to the unmoved run"

echo "=== 5. a held session resumed where it is"
rm -f "$dir/go"
run_guest b "$dir/held.out" "$probe" "$dir/go" &
prog=$!
for _ in $(seq 1 600); do grep -q READY "$dir/held.out" 2>/dev/null && break; sleep 0.05; done
sid=$(session_after b 0) || fail "no session on B"
"$ctl" --socket "$dir/b.sock" checkpoint "$sid" "$dir/held.ckpt" || fail "checkpoint on B"
if "$ctl" --socket "$dir/b.sock" migrate "$sid" --to "$dir/a.sock" >"$dir/m.txt" 2>&1; then fail "a held session moved"; fi
grep -q "held" "$dir/m.txt" || fail "held: $(cat "$dir/m.txt")"
"$ctl" --socket "$dir/b.sock" resume "$sid" || fail "resume"
touch "$dir/go"
wait $prog || fail "the resumed program: $(cat "$dir/held.out")"
grep -q "PASS migrate_probe" "$dir/held.out" || fail "held: $(cat "$dir/held.out")"
echo "held, refused a move while held, resumed: the program passed"

echo "=== 6. the cuda backend (stacked over Wormhole's driver onto a sim server): refused, the program goes on"
WORMHOLE_SPIN=0 WORMHOLE_SOCKET="$dir/b.sock" LD_LIBRARY_PATH="$build/guest-lib" "$build/bin/wormhole-server" \
  --backend cuda --allow-dropin-driver --socket "$dir/gpu.sock" --log-level info >"$dir/gpu.log" 2>&1 &
pids+=($!)
for _ in $(seq 1 100); do [ -S "$dir/gpu-admin.sock" ] && break; sleep 0.05; done
# (stop_resume: device memory and a kernel; the probe's managed memory is
# the sim device's only)
refused_then_goes_on gpu "$dir/gpu.out" stop_resume "cannot place it at the same addresses" "migrate SID --to $dir/a.sock" \
  "$(dirname "$probe")/stop_resume" "$dir/go"
echo "PASS"
