# Guests hand each other a value through the mailbox region (run-vms.sh --mailbox):
# VM "a" posts, VM "b" waits for it; both still see their own region first.
wh_run own-region wh-ivshmem --device "$WORMHOLE_DEVICE" info --expect-size "$WH_SHM_SIZE"
if [ "$WH_NAME" = a ]; then
  wh_run post wh-ivshmem --device "$WH_MAILBOX_DEV" poke --offset 0 --value 0x5742a11ce
else
  wh_expect receive '^0x5742a11ce$' wh-ivshmem --device "$WH_MAILBOX_DEV" peek --offset 0 --wait 60
fi
wh_exit
