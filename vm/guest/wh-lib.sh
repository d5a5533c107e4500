# Helpers for Wormhole guest jobs (sourced before every job; busybox sh).
# Markers on the console that the host harness (vm/launch.sh) reads:
#   WH-RESULT <name> PASS|FAIL [detail]
#   WH-BENCH <name> key=value ...
[ -f /wh/env ] && . /wh/env
WH_FAILS=0

# With a mailbox region (vm/run-vms.sh --mailbox), the VM's own region is
# the first ivshmem device and the mailbox the last: pin Wormhole to the
# first, and name the mailbox for wh-ivshmem --device "$WH_MAILBOX_DEV".
if [ -n "${WH_MAILBOX_SIZE:-}" ]; then
  _devs=$(for d in /sys/bus/pci/devices/*; do
            [ "$(cat $d/vendor)" = 0x1af4 ] && [ "$(cat $d/device)" = 0x1110 ] && basename $d
          done | sort)
  export WORMHOLE_DEVICE=$(echo "$_devs" | head -n1)
  export WH_MAILBOX_DEV=$(echo "$_devs" | tail -n1)
fi

# wh_result NAME PASS|FAIL [detail...]
wh_result() {
  _n=$1 _s=$2; shift 2
  [ "$_s" = PASS ] || WH_FAILS=$((WH_FAILS + 1))
  echo "WH-RESULT $_n $_s${*:+ $*}"
}

# wh_run NAME CMD [ARGS...]: run a command, PASS when it exits 0.
# Its output goes to the console, each line prefixed with "[NAME] ".
wh_run() {
  _name=$1; shift
  _t0=$(cut -d' ' -f1 /proc/uptime)
  { "$@" 2>&1; echo "rc=$?" >/tmp/.wh_rc; } | sed "s/^/[$_name] /"
  _rc=$(sed -n 's/^rc=//p' /tmp/.wh_rc)
  _t1=$(cut -d' ' -f1 /proc/uptime)
  _dt=$(awk "BEGIN{printf \"%.2f\", $_t1 - $_t0}")
  if [ "$_rc" = 0 ]; then wh_result "$_name" PASS "rc=0 t=${_dt}s"
  else wh_result "$_name" FAIL "rc=$_rc t=${_dt}s"; fi
  return "$_rc"
}

# wh_expect NAME REGEX CMD [ARGS...]: PASS when the command exits 0 and its
# output matches the (grep -E) regex.
wh_expect() {
  _name=$1 _re=$2; shift 2
  "$@" >/tmp/.wh_out 2>&1; _rc=$?
  sed "s/^/[$_name] /" /tmp/.wh_out
  if [ $_rc = 0 ] && grep -Eq -- "$_re" /tmp/.wh_out; then wh_result "$_name" PASS "rc=0"
  else wh_result "$_name" FAIL "rc=$_rc (wanted /$_re/)"; fi
}

# wh_bench NAME CMD [ARGS...]: run a benchmark that prints key=value pairs
# and republish its last line as "WH-BENCH NAME <line>".
wh_bench() {
  _name=$1; shift
  "$@" >/tmp/.wh_out 2>&1; _rc=$?
  sed "s/^/[$_name] /" /tmp/.wh_out
  if [ $_rc = 0 ]; then echo "WH-BENCH $_name $(tail -n1 /tmp/.wh_out)"; wh_result "$_name" PASS
  else wh_result "$_name" FAIL "rc=$_rc"; fi
}

# Exit status of a job: the number of failed checks (0 = all passed).
wh_exit() { exit "$WH_FAILS"; }
