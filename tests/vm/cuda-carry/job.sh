# The nvcc program starts in the guest with the drop-in runtime from
# /usr/lib/wormhole (found through ld.so.cache, no LD_LIBRARY_PATH), which
# maps the ivshmem BAR.
wh_expect carried 'mapped, [0-9]+ bytes' vector_add
wh_expect loader 'libcudart.so.13 => /usr/lib/wormhole/' sh -c 'LD_TRACE_LOADED_OBJECTS=1 vector_add'
wh_exit
