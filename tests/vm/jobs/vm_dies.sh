# VM "a" takes device memory and streams work until the launcher destroys it
# (--kill-on '^READY'); VM "b" goes on with its own work meanwhile. The host
# then checks the server freed all of a's device memory (check-freed.sh).
if [ "$WH_NAME" = a ]; then
  hold 64
  wh_result survived FAIL "the launcher did not destroy the VM"
else
  wh_run before vector_add
  sleep 3
  wh_run after_a_died matmul
  wh_run still_working streams_events
fi
wh_exit
