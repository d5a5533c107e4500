# Forwarded CUDA programs inside a guest (the shim finds the ivshmem device
# and speaks the ring protocol over its BAR), and isolation between VMs:
# VM "a" publishes the address of its device memory through the mailbox,
# VM "b" tries to use it, and "a" checks its data is untouched.
wh_run vector_add vector_add
wh_run matmul matmul
wh_run streams_events streams_events
wh_run symbols symbols
wh_run memset_2d memset_2d
wh_run mapped_pinned mapped_pinned
wh_run multithread multithread
wh_run multi_fatbin multi_fatbin
wh_run device_info device_info
wh_run async_errors async_errors oob
if [ "$WH_NAME" = a ]; then
  handle_probe own /tmp/go >/tmp/probe.out 2>&1 &
  probe=$!
  i=0
  while ! grep -q DPTR= /tmp/probe.out && [ $i -lt 600 ]; do sleep 0.1; i=$((i + 1)); done
  addr=$(sed -n 's/^DPTR=//p' /tmp/probe.out)
  wh_run publish wh-ivshmem --device "$WH_MAILBOX_DEV" poke --offset 0 --value "$addr"
  wh_expect attacked '^0x1$' wh-ivshmem --device "$WH_MAILBOX_DEV" peek --offset 8 --wait 240
  touch /tmp/go
  wait $probe
  wh_run isolation grep -q "PASS handle_probe own" /tmp/probe.out
  cat /tmp/probe.out
else
  addr=$(wh-ivshmem --device "$WH_MAILBOX_DEV" peek --offset 0 --wait 240)
  wh_run isolation handle_probe attack "$addr"
  wh-ivshmem --device "$WH_MAILBOX_DEV" poke --offset 8 --value 1
fi
wh_exit
