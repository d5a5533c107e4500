# Under libvirt (tests/vm/libvirt-start.sh): the <shmem> region is the BAR,
# the host's bytes are visible and ours reach the host file.
wh_run device wh-ivshmem info
wh_run host-to-guest wh-ivshmem check --seed 77 --offset 0 --len 65536
wh_run guest-to-host wh-ivshmem fill --seed 78 --offset 65536 --len 65536
wh_exit
