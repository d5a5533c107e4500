#!/usr/bin/env bash
# The chain bed's hostile L2 process (hostile.c), run on this machine against
# the real wormhole-server (sim backend, one VM channel, --vm-gate) with the
# gate module + gate.S played by fake_gate_preload.so: a well-behaved
# gate_client holds the VM's channel over vmfunc while hostile binds and calls
# on it and sends malformed slots. Checks: every hostile check passes (its
# /dev/mem and BAR parts need the chain bed: WH_HOSTILE_HOST skips them), the
# victim passes over vmfunc, and the server's gate counters moved by exactly
# what hostile caused (+1 bind: the victim's own).
# Usage: hostile-host.sh BUILD_DIR HOSTILE_BIN   (ctest exitless.hostile_host)
set -euo pipefail
B=$(realpath "$1") H=$(realpath "$2")
D=$(mktemp -d /tmp/wh-hostile.XXXXXX)
SPID=
trap '[[ -n $SPID ]] && kill -INT $SPID 2>/dev/null; sleep 0.5; rm -rf "$D"' EXIT
python3 - "$D/gate" <<'PY'
import struct, sys
b = bytearray(1 << 20)
g = 0x1000000000  # what QEMU's wormhole-gate object writes (wh_gate.h)
struct.pack_into('<QIIQQII', b, 0, 0x4554414748574d57, 1, 1, g, g + 0x2000, 8, 0x7f0)
open(sys.argv[1], 'wb').write(b)
PY
truncate -s 64M "$D/region"; : > "$D/gatedev"
"$B/bin/wormhole-server" --backend sim --sim-threads 1 --vm-channels 1 --socket "$D/srv.sock" \
  --vm "g=$D/region:1" --vm-gate "g=$D/gate" >"$D/server.log" 2>&1 &
SPID=$!
export WORMHOLE_DEVICE=$D/region WORMHOLE_GATE=$D/gatedev WH_FAKE_GATE_MEM=$D/gate WORMHOLE_SOCKET=$D/srv.sock
PRE=$B/tests/exitless/libwh_fake_gate_preload.so
for _ in $(seq 100); do grep -q 'serving the exitless gate' "$D/server.log" && break; sleep 0.1; done
gate_line() { kill -USR1 $SPID; sleep 0.5; grep -a 'gate: .* violations' "$D/server.log" | tail -n1; }
before=$(gate_line)
LD_LIBRARY_PATH=$B/guest-lib LD_PRELOAD=$PRE WORMHOLE_TRANSPORT=vmfunc WORMHOLE_VERBOSE=1 \
  timeout 300 "$B/tests/exitless/programs/gate_client" run 3000 >"$D/good.out" 2>&1 &
GP=$!
set +e
LD_PRELOAD=$PRE WH_HOSTILE_HOST=1 timeout 120 "$H" 60 | tee "$D/hostile.out"; hrc=${PIPESTATUS[0]}
wait $GP; grc=$?
set -e
after=$(gate_line)
fail=0
grep -q 'connected over vmfunc' "$D/good.out" && grep -q 'PASS gate_client' "$D/good.out" && ((grc == 0)) ||
  { echo "victim failed (rc $grc):"; tail -5 "$D/good.out"; fail=1; }
((hrc == 0)) || { echo "hostile: rc $hrc"; fail=1; }
num() { sed -E "s/.* ([0-9]+) binds, ([0-9]+) refused, ([0-9]+) violations.*/\\$1/" <<<"$2"; }
exp=$(grep -o 'expect refused=[0-9]* violations=[0-9]* binds=[0-9]*' "$D/hostile.out" || true)
[[ -n $exp ]] || { echo "hostile printed no expectation"; exit 1; }
eval "${exp#expect }"
db=$(($(num 1 "$after") - $(num 1 "$before"))) dr=$(($(num 2 "$after") - $(num 2 "$before")))
dv=$(($(num 3 "$after") - $(num 3 "$before")))
echo "server gate counters: binds +$db refused +$dr violations +$dv (want +$((binds + 1)) +$refused +$violations)"
((db == binds + 1 && dr == refused && dv == violations)) || fail=1
((fail == 0)) && echo "hostile-host: PASS" || echo "hostile-host: FAIL"
exit $fail
