# A TCG guest whose QEMU has `-object wormhole-gate` configured: TCG has no
# EPT views, so there is no gate (no /dev/wormhole-gate: the guest module
# would refuse with ENODEV) and forwarded CUDA must take the ivshmem path.
wh_expect no_gate_device '^absent$' sh -c '[ -e /dev/wormhole-gate ] && echo present || echo absent'
export WORMHOLE_VERBOSE=1
wh_expect vector_add 'connected over ivshmem' vector_add
wh_exit
