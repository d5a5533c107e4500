#!/usr/bin/env bash
# Host check after the guests (run-vms.sh --host-check; the server has been
# stopped by then): the server's log shows the destroyed VM's session reaped
# as "client died" with its device memory freed, and no other session dying.
# Usage: check-freed.sh <bytes the dead VM held>
set -u
log=$WH_WORKDIR/host-0.log
died=$(grep -c "ended (client died); freeing $1 bytes" "$log")
others=$(grep "ended (client died)" "$log" | grep -vc "freeing $1 bytes")
if [ "$died" = 1 ] && [ "$others" = 0 ]; then
  echo "check-freed: the dead VM's session was reaped and its $1 bytes freed"
  exit 0
fi
echo "check-freed: expected one reaped session freeing $1 bytes (got $died, others $others):" >&2
grep "session" "$log" >&2
exit 1
