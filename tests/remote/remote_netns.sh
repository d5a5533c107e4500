#!/bin/bash
# ucx:// between two network namespaces joined by a veth pair that this
# script creates (private addresses, only inside those namespaces), the
# server in one, the forwarded programs in the other, UCX over TCP.
# Usage: remote_netns.sh <build-dir> <case>
#   programs     forwarded programs: copies checked byte by byte, vector add,
#                cuBLAS (and, with WH_REMOTE_TRAIN=1, a short training run)
#   multi        two servers (two ports in the server namespace) as devices 0
#                and 1 of one program: per-device kernels, peer copies, cuBLAS
#                on device 1; also the server-to-server bench (WH_MULTI_BENCH=1)
#   suite        tests/forward's programs (suite.txt): each passes, or, where it
#                needs mapped/managed host memory, is refused with
#                cudaErrorNotSupported and the logged reason
#   unreachable  a server whose UCX cannot take the connection: the client
#                fails with a clean error (no abort)
#   auth         a wrong key is refused (and logged with the peer address); a
#                server without a key, or with a readable key file, does not start
#   quota        the key file owner's --uid-quota-mb bounds the credential's sessions
#   hostile      garbage, oversize lengths, records before authentication;
#                a forged resume token, forged moved-session checkpoints
#   partition    the veth link goes down under a running client: its call fails
#                within WORMHOLE_REMOTE_TIMEOUT_MS, the server frees the session
#   restart      the server is killed under a client (error, no hang), restarted,
#                and serves again
#   client_kill  a client is SIGKILLed: the server frees its session at once
#   train        a short wh-train run (tests/train) over UCX
#   migrate      wh-cnn and wh-gpt moved between two ucx:// servers mid-run
#                (wormholectl migrate): losses identical to an unmoved run;
#                failed moves leave the session running
#   bench        make bench-remote: raw TCP baselines and the ucx:// numbers
# Needs root (ip netns); exits 77 (skipped) where namespaces cannot be made.
set -u
build="$1"
mode="$2"
here="$(cd "$(dirname "$0")" && pwd)"
id=$$
ns_s="whs$id" ns_c="whc$id" if_s="wvs$id" if_c="wvc$id"
net="10.$((200 + id % 50)).$((id / 50 % 250)).0"
ip_s="${net%.0}.1" ip_c="${net%.0}.2"
port=7711
tmp="$(mktemp -d /tmp/wh-remote-XXXXXX)"
spid=""
fail() { echo "FAIL: $*" >&2; echo "--- server log:" >&2; cat "$tmp/server.log" >&2 2>/dev/null; exit 1; }
cleanup() {
  [ -n "$spid" ] && kill -KILL "$spid" 2>/dev/null && wait "$spid" 2>/dev/null
  for p in $(ip netns pids "$ns_c" 2>/dev/null) $(ip netns pids "$ns_s" 2>/dev/null); do kill -KILL "$p" 2>/dev/null; done
  ip netns del "$ns_s" 2>/dev/null
  ip netns del "$ns_c" 2>/dev/null
  rm -rf "$tmp"
}
trap cleanup EXIT
if [ "$(id -u)" != 0 ] || ! command -v ip >/dev/null || ! ip netns add "$ns_s" 2>/dev/null; then
  echo "SKIP: cannot create network namespaces (needs root and ip(8))"
  exit 77
fi
ip netns add "$ns_c" || exit 77
ip link add "$if_s" type veth peer name "$if_c" || exit 77
ip link set "$if_s" netns "$ns_s"
ip link set "$if_c" netns "$ns_c"
ip -n "$ns_s" addr add "$ip_s/24" dev "$if_s"
ip -n "$ns_c" addr add "$ip_c/24" dev "$if_c"
for n in "$ns_s" "$ns_c"; do ip -n "$n" link set lo up; done
ip -n "$ns_s" link set "$if_s" up
ip -n "$ns_c" link set "$if_c" up

export UCX_TLS=tcp
url="ucx://$ip_s:$port"
head -c 48 /dev/urandom | base64 > "$tmp/key"
chmod 600 "$tmp/key"

# Starts the server in its namespace; waits until it listens.
start_server() {
  local before
  : >> "$tmp/server.log"
  before=$(grep -c "listening for network clients" "$tmp/server.log")
  ip netns exec "$ns_s" "$build/bin/wormhole-server" --backend sim --socket "$tmp/server.sock" \
    --listen "$url" --auth-key-file "$tmp/key" --remote-timeout-ms 2000 --no-stats "$@" >>"$tmp/server.log" 2>&1 &
  spid=$!
  # The log is appended to across restarts: wait for one more listening line.
  for _ in $(seq 1 100); do
    [ "$(grep -c "listening for network clients" "$tmp/server.log")" -gt "$before" ] && return 0
    kill -0 "$spid" 2>/dev/null || fail "the server exited"
    sleep 0.1
  done
  fail "the server does not listen"
}
# Runs a program in the client namespace through the drop-ins.
client() {
  ip netns exec "$ns_c" env WORMHOLE_SERVER="$url" WORMHOLE_AUTH_KEY_FILE="${KEY:-$tmp/key}" \
    WORMHOLE_REMOTE_TIMEOUT_MS="${TIMEOUT_MS:-3000}" LD_LIBRARY_PATH="$build/guest-lib" "$@"
}
wait_log() {  # pattern, tenths of a second
  for _ in $(seq 1 "$2"); do grep -q "$1" "$tmp/server.log" && return 0; sleep 0.1; done
  return 1
}
ms() { date +%s%3N; }

case "$mode" in
programs)
  start_server
  WORMHOLE_VERBOSE=1 client "$build/tests/remote/roundtrip" 64 > "$tmp/out" 2>&1 || { cat "$tmp/out"; fail "roundtrip"; }
  grep -q "remote kernel says 42" "$tmp/out" || { cat "$tmp/out"; fail "device printf did not come back"; }
  # Pinned memory (two 8 MiB cudaMallocHost buffers, two 64 MiB
  # cudaHostRegister ranges) registered with UCX once each.
  [ "$(grep -c "registered 8388608 bytes of pinned memory with UCX" "$tmp/out")" = 2 ] &&
    [ "$(grep -c "registered 67108864 bytes of pinned memory with UCX" "$tmp/out")" = 2 ] ||
    { cat "$tmp/out"; fail "pinned memory was not registered with UCX"; }
  grep -q "PASS" "$tmp/out" || fail "roundtrip printed no PASS"
  client "$build/tests/forward/programs/vector_add" || fail "vector_add"
  client "$build/tests/blas/wh_blas_test" || fail "cuBLAS program"
  if [ "${WH_REMOTE_TRAIN:-0}" = 1 ]; then
    client "$build/tests/train/wh-train" ${WH_REMOTE_TRAIN_ARGS:---epochs 1 --limit 2048} || fail "training run"
  fi
  grep -q "network client $ip_c" "$tmp/server.log" || fail "no session from the client namespace in the log"
  ;;
multi)
  # Server B: a second server in the same namespace, another port and its
  # own device address window (server A's is left random).
  url_b="ucx://$ip_s:7712"
  ip netns exec "$ns_s" "$build/bin/wormhole-server" --backend sim --socket "$tmp/b.sock" \
    --listen "$url_b" --auth-key-file "$tmp/key" --remote-timeout-ms 2000 --no-stats \
    --device-va-base 0x2000000000000 >"$tmp/b.log" 2>&1 &
  bpid=$!
  for _ in $(seq 1 100); do grep -q "listening for network clients" "$tmp/b.log" && break; sleep 0.1; done
  grep -q "listening for network clients" "$tmp/b.log" || { cat "$tmp/b.log"; fail "server B does not listen"; }
  start_server --device-va-base 0x3000000000000
  servers="$url,$ip_s:7712"  # the second one without its scheme
  url="$servers" client "$build/tests/remote/multi" > "$tmp/out" 2>&1 \
    || { cat "$tmp/out"; echo "--- server B:"; cat "$tmp/b.log"; fail "multi"; }
  cat "$tmp/out"
  grep -q "^PASS" "$tmp/out" || fail "multi printed no PASS"
  grep -q "network client $ip_c" "$tmp/b.log" || { cat "$tmp/b.log"; fail "no session on server B"; }
  # The peer copies went server to server: B received device 0's bytes
  # from server A's address (not the client's), and A device 1's from B.
  n0=$((((4 << 20) + 17) * 4))
  grep -q "peer copy: received $n0 bytes from server $ip_s" "$tmp/b.log" \
    || { cat "$tmp/b.log"; fail "server B did not receive the 0->1 peer copy from server A"; }
  grep -q "peer copy: received $(( (n0 / 4 - 2000) * 4 )) bytes from server $ip_s" "$tmp/server.log" \
    || fail "server A did not receive the 1->0 peer copy from server B"
  # ... and their statistics count it (wormholectl stats).
  ip netns exec "$ns_s" "$build/bin/wormholectl" --socket "$tmp/b.sock" stats > "$tmp/ctl" 2>&1 || { cat "$tmp/ctl"; fail "wormholectl stats on B"; }
  grep -q "^peer copies .* received from other servers" "$tmp/ctl" || { cat "$tmp/ctl"; fail "B's statistics show no peer copy"; }
  # A single-server program is unchanged beside it.
  client "$build/tests/remote/roundtrip" 4 > "$tmp/out" 2>&1 || { cat "$tmp/out"; fail "roundtrip on one server"; }
  if [ "${WH_MULTI_BENCH:-0}" = 1 ]; then
    TIMEOUT_MS=10000 url="$servers" client "$build/tests/remote/multi" bench > "$tmp/bench" 2>&1 \
      || { cat "$tmp/bench"; fail "multi bench"; }
    cat "$tmp/bench"
    [ -n "${WH_BENCH_OUT:-}" ] && sed -n 's/^peer_gb_s=/multi: 64 MiB peer copy server to server GB\/s=/p' "$tmp/bench" > "$WH_BENCH_OUT"
  fi
  kill "$bpid" 2>/dev/null; wait "$bpid" 2>/dev/null
  ;;
suite)
  # The forwarded-program suite (tests/forward's programs) over ucx://. Each
  # line: expect name args. "pass": the program must print its PASS line
  # and exit 0; "grep:TEXT": exit 0 and print TEXT; "refused": it needs
  # mapped or managed host memory, which a server on another machine cannot
  # reach: it must fail with cudaErrorNotSupported and the logged reason.
  # A line "server ARGS" restarts the server with those options.
  start_server
  progs="$build/tests/forward/programs"
  reason="mapped host memory and managed memory are not available over ucx://"
  nfail=0 npass=0 nref=0
  while read -r expect name args; do
    [ -z "$expect" ] || [ "${expect#\#}" != "$expect" ] && continue
    if [ "$expect" = server ]; then
      kill -TERM "$spid"; wait "$spid" 2>/dev/null; spid=""
      start_server $name $args
      echo "remote.suite: server restarted with: $name $args"
      continue
    fi
    label="$name${args:+ $args}"
    client "$progs/$name" $args > "$tmp/out" 2>&1; rc=$?
    if [ "$expect" != refused ]; then
      want="PASS"
      [ "${expect#grep:}" != "$expect" ] && want="${expect#grep:}"
      if [ $rc = 0 ] && grep -qE "(^|: )$want" "$tmp/out" && ! grep -q "^FAIL" "$tmp/out"; then
        echo "PASS remote.suite $label"; npass=$((npass + 1))
      else
        echo "FAIL remote.suite $label (exit $rc)"; sed 's/^/    /' "$tmp/out" | tail -15; nfail=$((nfail + 1))
      fi
    else
      if [ $rc != 0 ] && grep -q "cudaErrorNotSupported" "$tmp/out" && grep -qF "$reason" "$tmp/out"; then
        echo "PASS remote.suite $label refused: $(grep -m1 cudaErrorNotSupported "$tmp/out")"; nref=$((nref + 1))
      else
        echo "FAIL remote.suite $label (exit $rc): not refused with cudaErrorNotSupported and the reason"
        sed 's/^/    /' "$tmp/out" | tail -15; nfail=$((nfail + 1))
      fi
    fi
  done < "$here/suite.txt"
  echo "remote.suite: $npass passed, $nref refused as designed, $nfail failed"
  [ $nfail = 0 ] || fail "$nfail program(s) of the suite failed over ucx://"
  grep -q "network client $ip_c" "$tmp/server.log" || fail "no session from the client namespace in the log"
  ;;
unreachable)
  # The server's UCX does not use the device the client comes in on, so the
  # connection is never established: the client must fail cleanly within
  # its timeout (no UCX abort at teardown), and again on a second try.
  UCX_NET_DEVICES=lo start_server
  for k in 1 2; do
    TIMEOUT_MS=1500 client "$build/tests/forward/programs/vector_add" > "$tmp/out" 2>&1; rc=$?
    cat "$tmp/out"
    [ $rc = 1 ] || fail "client exit status $rc (expected 1: a failed call, no abort)"
    grep -q "cannot reach wormhole-server at $url" "$tmp/out" || fail "no clean error"
    grep -q "cudaErrorNoDevice" "$tmp/out" || fail "the call did not fail with cudaErrorNoDevice"
  done
  ;;
auth)
  start_server
  head -c 48 /dev/urandom | base64 > "$tmp/wrong"
  chmod 600 "$tmp/wrong"
  if KEY="$tmp/wrong" client "$build/tests/remote/roundtrip" 1 > "$tmp/out" 2>&1; then fail "a wrong key was accepted"; fi
  grep -q "refused" "$tmp/out" || { cat "$tmp/out"; fail "the client did not say it was refused"; }
  wait_log "refused a network client from $ip_c.*authentication failed" 30 || fail "refusal not logged with the peer"
  if KEY=/nonexistent client "$build/tests/remote/roundtrip" 1 > "$tmp/out" 2>&1; then fail "no key was accepted"; fi
  client "$build/tests/remote/roundtrip" 1 > "$tmp/out" 2>&1 || { cat "$tmp/out"; fail "the right key was refused"; }
  # A "server" without the key that accepts every client: the client must
  # not go on with it (the verdict's MAC proves the server holds the key).
  ip netns exec "$ns_s" "$build/tests/remote/wh_remote_hostile" --impostor "ucx://$ip_s:7714" > "$tmp/impostor.out" 2>&1 &
  ipid=$!
  for _ in $(seq 1 50); do grep -q "impostor listening" "$tmp/impostor.out" && break; sleep 0.1; done
  if url="ucx://$ip_s:7714" client "$build/tests/remote/roundtrip" 1 > "$tmp/out" 2>&1; then
    kill "$ipid"; fail "a client went on with a server that does not hold the key"; fi
  kill "$ipid" 2>/dev/null; wait "$ipid" 2>/dev/null
  grep -q "did not prove it holds the key" "$tmp/out" || { cat "$tmp/out" "$tmp/impostor.out"; fail "the client did not say why"; }
  # A server on a network without a key, or with a key others can read, does not start.
  if ip netns exec "$ns_s" "$build/bin/wormhole-server" --backend sim --socket "$tmp/s2.sock" \
       --listen "ucx://$ip_s:7712" > "$tmp/nokey.log" 2>&1; then fail "server listened without a key"; fi
  grep -q "requires authentication" "$tmp/nokey.log" || { cat "$tmp/nokey.log"; fail "no reason given"; }
  cp "$tmp/key" "$tmp/open"; chmod 644 "$tmp/open"
  if ip netns exec "$ns_s" "$build/bin/wormhole-server" --backend sim --socket "$tmp/s3.sock" \
       --listen "ucx://$ip_s:7713" --auth-key-file "$tmp/open" > "$tmp/open.log" 2>&1; then
    fail "server started with a world-readable key"; fi
  grep -q "accessible by group or others" "$tmp/open.log" || { cat "$tmp/open.log"; fail "no reason given"; }
  ;;
quota)
  # The credential's quota: sessions proving a key draw on the budget of the
  # key file's owner (--uid-quota-mb), here 16 MiB.
  start_server --uid-quota-mb "$(stat -c %u "$tmp/key")=16"
  if client "$build/tests/remote/roundtrip" 32 > "$tmp/out" 2>&1; then fail "32 MiB allocated over a 16 MiB quota"; fi
  grep -q "cudaMalloc.*cudaErrorMemoryAllocation" "$tmp/out" || { cat "$tmp/out"; fail "not refused for memory"; }
  client "$build/tests/remote/roundtrip" 8 > "$tmp/out" 2>&1 || { cat "$tmp/out"; fail "8 MiB within the quota"; }
  ;;
hostile)
  start_server
  ip netns exec "$ns_c" "$build/tests/remote/wh_remote_hostile" "$url" "$tmp/key" | tee "$tmp/hostile.out"
  [ "${PIPESTATUS[0]}" = 0 ] || fail "hostile peer"
  kill -0 "$spid" || fail "the server died"
  grep -q "forged token: refused (no moved session waits here under this token)" "$tmp/hostile.out" ||
    fail "a forged resume token not refused by name"
  grep -q "refused a session moving here .*: not a checkpoint's header" "$tmp/server.log" &&
    [ "$(grep -c "refused a session moving here" "$tmp/server.log")" = 2 ] || fail "forged moves not refused by name"
  client "$build/tests/remote/roundtrip" 4 > "$tmp/out" 2>&1 || { cat "$tmp/out"; fail "a good client after the hostile one"; }
  ;;
partition)
  start_server
  TIMEOUT_MS=1500 client "$build/tests/remote/loop" 32 60 > "$tmp/out" 2>&1 &
  cpid=$!
  for _ in $(seq 1 100); do grep -q READY "$tmp/out" && break; sleep 0.1; done
  grep -q READY "$tmp/out" || fail "client not ready"
  sleep 0.5
  t0=$(ms)
  ip -n "$ns_c" link set "$if_c" down
  wait "$cpid"; rc=$?
  t1=$(ms)
  cat "$tmp/out"
  [ $rc = 2 ] || fail "client exit status $rc (expected 2: a failed call)"
  grep -q "ERROR cudaErrorDevicesUnavailable" "$tmp/out" || fail "the client's error is not cudaErrorDevicesUnavailable"
  [ $((t1 - t0)) -lt 4000 ] || fail "the client took $((t1 - t0)) ms to fail (timeout 1500 ms)"
  echo "client failed $((t1 - t0)) ms after the link went down"
  wait_log "session 1: ended (client silent" 60 || fail "the server did not end the session"
  grep -q "freeing 33554432 bytes" "$tmp/server.log" || fail "the session's memory was not freed"
  ;;
restart)
  start_server
  TIMEOUT_MS=5000 client "$build/tests/remote/loop" 32 60 > "$tmp/out" 2>&1 &
  cpid=$!
  for _ in $(seq 1 100); do grep -q READY "$tmp/out" && break; sleep 0.1; done
  t0=$(ms)
  kill -KILL "$spid"; wait "$spid" 2>/dev/null; spid=""
  wait "$cpid"; rc=$?
  t1=$(ms)
  cat "$tmp/out"
  [ $rc = 2 ] && grep -q "ERROR cudaErrorDevicesUnavailable" "$tmp/out" || fail "client status $rc"
  [ $((t1 - t0)) -lt 6000 ] || fail "the client took $((t1 - t0)) ms to fail"
  start_server
  client "$build/tests/remote/roundtrip" 4 > "$tmp/out" 2>&1 || { cat "$tmp/out"; fail "after the restart"; }
  ;;
client_kill)
  start_server
  client "$build/tests/remote/loop" 32 60 > "$tmp/out" 2>&1 &
  cpid=$!
  for _ in $(seq 1 100); do grep -q READY "$tmp/out" && break; sleep 0.1; done
  # The program: the only process in the client namespace.
  for p in $(ip netns pids "$ns_c"); do kill -KILL "$p"; done
  wait "$cpid" 2>/dev/null
  wait_log "session 1: ended (client disconnected" 30 || fail "the server did not notice the client's death"
  grep -q "freeing 33554432 bytes" "$tmp/server.log" || fail "the session's memory was not freed"
  client "$build/tests/remote/roundtrip" 4 > "$tmp/out" 2>&1 || { cat "$tmp/out"; fail "a new client after the kill"; }
  ;;
train)
  # A short forwarded training run (tests/train's MLP) over UCX.
  [ -x "$build/tests/train/wh-train" ] || fail "no $build/tests/train/wh-train"
  start_server
  client "$build/tests/train/wh-train" ${WH_TRAIN_ARGS:---epochs 2 --batch 100 --subset 6000 --test-subset 2000 --no-progress} \
    > "$tmp/out" 2>&1 || { cat "$tmp/out"; fail "training run"; }
  cat "$tmp/out" | tail -3
  acc=$(sed -n 's/^final test_acc=\([0-9.]*\)%.*/\1/p' "$tmp/out")
  awk -v a="${acc:-0}" -v m="${WH_TRAIN_MIN_ACC:-70}" 'BEGIN { exit !(a >= m) }' || fail "test accuracy ${acc:-?}% < ${WH_TRAIN_MIN_ACC:-70}%"
  ;;
migrate)
  # wormholectl migrate of a network client's session between two ucx://
  # servers (docs/migration.md): wh-cnn moved A -> B -> A mid-epoch has the
  # per-step losses of an unmoved run, bit for bit; wh-gpt moved A -> B too. Before the first move,
  # moves that must fail and leave the session running on A: to an address
  # where no server listens, to a server whose quota is too small, to a
  # server that stops answering half-way (then killed), to a unix socket
  # (a network client's session moves to ucx:// servers), and a checkpoint
  # to a file (not for network sessions).
  cnn="$build/tests/train/wh-cnn"
  [ -x "$cnn" ] || fail "no $cnn"
  ctl() { "$build/bin/wormholectl" "$@"; }
  start_other() {  # name port [options]
    local name="$1" port="$2"; shift 2
    ip netns exec "$ns_s" "$build/bin/wormhole-server" --backend sim --socket "$tmp/$name.sock" \
      --listen "ucx://$ip_s:$port" --auth-key-file "$tmp/key" --remote-timeout-ms 2000 --no-stats "$@" \
      >"$tmp/$name.log" 2>&1 &
    for _ in $(seq 1 100); do grep -q "listening for network clients" "$tmp/$name.log" && return 0; sleep 0.1; done
    cat "$tmp/$name.log"; fail "server $name does not listen"
  }
  start_other b 7712
  start_other small 7713 --quota-mb 4
  start_other doomed 7714
  doomed_pid=$!
  start_server --log-level info
  sessions() {  # "id calls" of server $1's only session
    ctl --socket "$1" --json sessions 2>/dev/null |
      python3 -c 'import json,sys; s=json.load(sys.stdin)["sessions"]; print("%d %d" % (s[0]["id"], s[0]["calls"]) if s else "")'
  }
  # Long enough (10-20 s) for the refusals and both moves to happen mid-epoch.
  session_after() {  # the id of server A's only session once it made $1 calls
    local line
    for _ in $(seq 1 1200); do
      line=$(sessions "$tmp/server.sock")
      if [ -n "$line" ] && [ "${line#* }" -ge "$1" ]; then echo "${line% *}"; return 0; fi
      sleep 0.05
    done
    return 1
  }
  args=(--epochs 1 --batch 64 --subset ${WH_CNN_SUBSET:-48000} --test-subset 1000 --no-progress)
  t0=$(ms)
  client "$cnn" "${args[@]}" --loss-out "$tmp/loss-ref.txt" > "$tmp/ref.out" 2>&1 || { cat "$tmp/ref.out"; fail "wh-cnn unmoved"; }
  echo "wh-cnn over ucx:// unmoved: $(( $(ms) - t0 )) ms"
  TIMEOUT_MS=10000 WORMHOLE_VERBOSE=1 client "$cnn" "${args[@]}" --loss-out "$tmp/loss-moved.txt" > "$tmp/moved.out" 2>&1 &
  prog=$!
  sid=$(session_after 200) || fail "no wh-cnn session on A"
  refused() {  # what ctl-args...
    local what="$1"; shift
    if ctl --socket "$tmp/server.sock" "$@" > "$tmp/m.txt" 2>&1; then fail "wormholectl $* succeeded"; fi
    grep -q "$what" "$tmp/m.txt" || fail "wormholectl $*: $(cat "$tmp/m.txt") (expected: $what)"
    echo "refused as expected: $(cat "$tmp/m.txt")"
  }
  refused "cannot reach the destination" migrate "$sid" --to "ucx://$ip_s:7719"
  refused "free to it here" migrate "$sid" --to "ucx://$ip_s:7713"
  refused "network client's" migrate "$sid" --to "$tmp/b.sock"
  refused "not be checkpointed" checkpoint "$sid" "$tmp/s.ckpt"
  kill -STOP "$doomed_pid"
  refused "the destination: no challenge" migrate "$sid" --to "ucx://$ip_s:7714"
  kill -KILL "$doomed_pid"
  ctl --socket "$tmp/server.sock" migrate "$sid" --to "ucx://$ip_s:7712" | tee "$tmp/m1.txt" || fail "move A -> B"
  sid_b=$(sed -n 's/.*: session \([0-9]*\) there.*/\1/p' "$tmp/m1.txt")
  [ -n "$sid_b" ] || fail "no session id in: $(cat "$tmp/m1.txt")"
  sleep 1
  ctl --socket "$tmp/b.sock" migrate "$sid_b" --to "$url" | tee "$tmp/m2.txt" || { cat "$tmp/b.log"; fail "move B -> A"; }
  wait $prog || { tail -20 "$tmp/moved.out"; cat "$tmp/b.log"; fail "the moved wh-cnn run failed"; }
  steps=$(grep -vc '^epoch' "$tmp/loss-ref.txt")
  cmp -s "$tmp/loss-ref.txt" "$tmp/loss-moved.txt" && [ "$steps" -gt 0 ] ||
    { diff "$tmp/loss-ref.txt" "$tmp/loss-moved.txt" | head; fail "losses differ after the moves"; }
  acc_ref=$(sed -n 's/^final test_acc=\([0-9.]*\)%.*/\1/p' "$tmp/ref.out")
  acc_mov=$(sed -n 's/^final test_acc=\([0-9.]*\)%.*/\1/p' "$tmp/moved.out")
  [ -n "$acc_ref" ] && [ "$acc_ref" = "$acc_mov" ] || fail "accuracy $acc_mov% after the moves, $acc_ref% unmoved"
  [ "$(grep -c "the session moved to ucx://" "$tmp/moved.out")" = 2 ] || { cat "$tmp/moved.out"; fail "the client did not follow two moves"; }
  grep -q "followed its session here" "$tmp/b.log" || { cat "$tmp/b.log"; fail "B's log shows no client following"; }
  grep -h "migrated to" "$tmp/server.log" "$tmp/b.log"
  echo "wh-cnn over ucx:// moved A -> B -> A: losses bit-identical over $steps steps, test accuracy $acc_mov% both"
  # wh-gpt (bf16, cuBLASLt) moved A -> B after about 40 of
  # its 120 steps: the same losses as unmoved.
  gpt="$build/tests/train/wh-gpt"
  gargs=(--steps 120 --eval-every 40 --val-batches 1 --sample 0 --seed 1337 --quiet)
  client "$gpt" "${gargs[@]}" --loss-log "$tmp/gpt-ref.log" > "$tmp/gpt-ref.out" 2>&1 || { cat "$tmp/gpt-ref.out"; fail "wh-gpt unmoved"; }
  TIMEOUT_MS=10000 WORMHOLE_VERBOSE=1 client "$gpt" "${gargs[@]}" --loss-log "$tmp/gpt-moved.log" > "$tmp/gpt-moved.out" 2>&1 &
  prog=$!
  sid=$(session_after 4000) || { tail -5 "$tmp/gpt-moved.out"; fail "no wh-gpt session on A"; }
  ctl --socket "$tmp/server.sock" migrate "$sid" --to "ucx://$ip_s:7712" | tee "$tmp/m3.txt" || fail "wh-gpt: move A -> B"
  wait $prog || { tail -20 "$tmp/gpt-moved.out"; cat "$tmp/b.log"; fail "the moved wh-gpt run failed"; }
  grep -q "the session moved to ucx://" "$tmp/gpt-moved.out" || fail "wh-gpt did not follow its session"
  steps=$(grep -c '^step' "$tmp/gpt-ref.log")
  cmp -s "$tmp/gpt-ref.log" "$tmp/gpt-moved.log" && [ "$steps" = 120 ] ||
    { diff "$tmp/gpt-ref.log" "$tmp/gpt-moved.log" | head; fail "wh-gpt: losses differ after the move"; }
  echo "wh-gpt over ucx:// moved A -> B: losses identical over $steps steps"
  # A program that makes a synchronous call only every 5 s (its device
  # counter checked at each): a move given 1 s is given up and the program
  # goes on at A; the default waits for its next call and moves it.
  TIMEOUT_MS=10000 client "$build/tests/remote/loop" 8 12 5000 > "$tmp/loop.out" 2>&1 &
  prog=$!
  for _ in $(seq 1 100); do grep -q READY "$tmp/loop.out" && break; sleep 0.1; done
  sleep 0.5
  sid=$(session_after 0) || fail "no session of the idle program on A"
  refused "did not reach a point where it can stop within 1 s" migrate "$sid" --to "ucx://$ip_s:7712" --wait 1
  ctl --socket "$tmp/server.sock" migrate "$sid" --to "ucx://$ip_s:7712" | tee "$tmp/m4.txt" || fail "idle program: move A -> B"
  wait $prog || { cat "$tmp/loop.out"; fail "the idle program failed after its move"; }
  grep -q DONE "$tmp/loop.out" || { cat "$tmp/loop.out"; fail "the idle program did not finish"; }
  ;;
bench)
  # make bench-remote: raw TCP first (ping-pong, bulk), then ucx://, both
  # between the same namespaces; the summary line goes to stdout and to
  # $WH_BENCH_OUT when set.
  ip netns exec "$ns_s" "$build/bench/wh_tcp_bench" server 7720 > "$tmp/tcp.log" 2>&1 &
  tpid=$!
  for _ in $(seq 1 50); do grep -q listening "$tmp/tcp.log" && break; sleep 0.1; done
  tcp=$(ip netns exec "$ns_c" "$build/bench/wh_tcp_bench" client "$ip_s" 7720) || fail "raw TCP bench"
  wait "$tpid"
  start_server
  ucx=$(client "$build/bench/bench_remote" ${WH_BENCH_CALLS:-20000} ${WH_BENCH_SECONDS:-2}) || fail "bench_remote"
  # The same copies with the staged path (no UCX registration, device-to-host
  # bytes through the link's buffer), for comparison.
  staged=$(WORMHOLE_UCX_STAGED_COPIES=1 client "$build/bench/bench_remote" 1000 0.2) || fail "bench_remote (staged)"
  echo "raw tcp: $tcp"
  echo "ucx:     $ucx"
  echo "staged:  $staged"
  get() { echo "$1" | tr ' ' '\n' | sed -n "s/^$2=//p"; }
  line=$(awk -v rtt="$(get "$tcp" rtt_p50_us)" -v rtt99="$(get "$tcp" rtt_p99_us)" \
    -v up="$(get "$tcp" bulk_up_gb_s)" -v down="$(get "$tcp" bulk_down_gb_s)" \
    -v p50="$(get "$ucx" null_call_p50_us)" -v p99="$(get "$ucx" null_call_p99_us)" \
    -v h2d="$(get "$ucx" h2d_gb_s)" -v d2h="$(get "$ucx" d2h_gb_s)" -v lps="$(get "$ucx" launches_per_s)" \
    -v ph2d="$(get "$ucx" h2d_pinned_gb_s)" -v pd2h="$(get "$ucx" d2h_pinned_gb_s)" \
    -v sh2d="$(get "$staged" h2d_gb_s)" -v sd2h="$(get "$staged" d2h_gb_s)" \
    -v sph2d="$(get "$staged" h2d_pinned_gb_s)" -v spd2h="$(get "$staged" d2h_pinned_gb_s)" 'BEGIN {
      printf "bench-remote (ucx over tcp, veth, sim backend): null call p50 %.1f us p99 %.1f us (raw TCP rtt p50 %.1f us p99 %.1f us: %.2fx); ", p50, p99, rtt, rtt99, p50 / rtt;
      printf "64 MiB H2D %.2f GB/s D2H %.2f GB/s pageable, %.2f / %.2f GB/s pinned (raw TCP bulk %.2f / %.2f GB/s: pageable %.2fx / %.2fx, pinned %.2fx / %.2fx); ", h2d, d2h, ph2d, pd2h, up, down, h2d / up, d2h / down, ph2d / up, pd2h / down;
      printf "staged path H2D %.2f / D2H %.2f GB/s pageable, %.2f / %.2f pinned; posted launches %.0f/s\n", sh2d, sd2h, sph2d, spd2h, lps }')
  echo "$line"
  [ -n "${WH_BENCH_OUT:-}" ] && echo "$line" > "$WH_BENCH_OUT"
  ;;
*) echo "unknown case $mode" >&2; exit 2 ;;
esac
echo "PASS remote.$mode"
