#!/usr/bin/env bash
# Host check after a deterministic workload ran in every guest at once
# (run-vms.sh --host-check; the server has been stopped by then):
#   1. isolation: the server served each VM through its own session on its
#      own region (one "session N: vm <name>" line per VM, each ended by its
#      client closing, none died) and rejected no request;
#   2. determinism: the parts of the guests' output lines of job marker NAME
#      that match the ERE are identical in every guest (timings left out),
#      and there is at least one.
# Usage: check-same.sh NAME ERE
# e.g.   check-same.sh cnn_accuracy '(loss [0-9.]+  test_acc [0-9.]+%|final test_acc=[0-9.]+%)'
set -u
name=$1 ere=$2
log=$WH_WORKDIR/host-0.log
fail=0
for vm in $WH_VMS; do
  n=$(grep -c "session [0-9]*: vm $vm channel" "$log")
  if [ "$n" != 1 ]; then echo "check-same: vm $vm had $n sessions (want 1)" >&2; fail=1; fi
done
if grep -q "ended (client died)" "$log"; then echo "check-same: a session died:" >&2; grep "ended" "$log" >&2; fail=1; fi
if ! grep -q "rejected 0;" "$log"; then echo "check-same: the server rejected requests:" >&2; grep "rejected" "$log" >&2; fail=1; fi
first="" ref=""
for vm in $WH_VMS; do
  got=$(tr -d '\r' <"$WH_WORKDIR/$vm.serial.log" | grep "^\[$name\] " | grep -oE -- "$ere")
  if [ -z "$got" ]; then echo "check-same: vm $vm printed no line matching /$ere/" >&2; fail=1; continue; fi
  if [ -z "$first" ]; then first=$vm ref=$got
  elif [ "$got" != "$ref" ]; then
    echo "check-same: vm $vm differs from vm $first:" >&2
    diff <(echo "$ref") <(echo "$got") >&2; fail=1
  fi
done
if [ $fail = 0 ]; then
  echo "check-same: one session per VM, none died, nothing rejected; every guest printed:"
  echo "$ref" | sed 's/^/  /'
fi
exit $fail
