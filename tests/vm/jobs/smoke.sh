# Two-VM smoke job (runs in each guest): the ivshmem BAR is there, bytes the
# host wrote before boot are visible, bytes written here reach the host file,
# and a live ping-pong with a host echo process works.
# Env (from tests/vm/smoke.sh): SEED_HOST SEED_GUEST; WH_SHM_SIZE from the harness.
wh_run device wh-ivshmem info --expect-size "$WH_SHM_SIZE"
wh_run host-to-guest wh-ivshmem check --seed "$SEED_HOST" --offset 1048576 --len 1048576
wh_run guest-to-host wh-ivshmem fill --seed "$SEED_GUEST" --offset 0 --len 1048576
wh_bench pingpong wh-ivshmem ping --offset 2097152 --iters 2000 --warmup 100
wh_exit
