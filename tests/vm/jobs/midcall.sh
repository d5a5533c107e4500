# Prints a marker and then waits "in the middle of a call" to be destroyed
# by the launcher (--kill-on '^WH-MIDCALL'); reaching the end is a failure.
wh_run before true
echo "WH-MIDCALL"
sleep 60
wh_result survived FAIL "the launcher did not destroy the VM"
wh_exit
