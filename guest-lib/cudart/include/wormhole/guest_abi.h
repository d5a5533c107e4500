/* The C entry points Wormhole's libcudart.so.13 exports to Wormhole's other
   guest libraries (libcuda.so.1, libcublas, libcublasLt, libcufft, libcurand,
   libcudnn): they share this process's one connection and server session,
   since device pointers from cudaMalloc are valid only in that session.
   Defined in guest-lib/cudart/src/export.cpp, exported by libcudart.map
   (wh_guest_*); everything else in libcudart stays local. An int result is a
   cudaError_t. */
#ifndef WORMHOLE_GUEST_ABI_H
#define WORMHOLE_GUEST_ABI_H

#include <stddef.h>
#include <stdint.h>

struct cudaFuncAttributes;

#ifdef __cplusplus
extern "C" {
#endif

/* The connection and requests of the API table (proto/) by opcode. */
void* wh_guest_connection(void);
int wh_guest_call(uint16_t op, const void* rq, size_t rq_len, const void* tail, size_t tail_len, void* rs,
                  size_t rs_len, int posted);

/* Modules and libraries of the driver API (cuModule*, cuLibrary*). */
int wh_guest_module_load(const void* image, size_t size, void** module);
int wh_guest_module_unload(void* module);
int wh_guest_module_function(void* module, const char* name, void** fn);
int wh_guest_module_function_names(void* module, const char** names, size_t cap, size_t* count);
int wh_guest_module_global(void* module, const char* name, uint64_t* dptr, size_t* bytes);
int wh_guest_library_load(const void* image, size_t size, void** lib);
int wh_guest_library_module(void* lib);
int wh_guest_module_managed(void* module, const char* name, void** ptr, size_t* bytes);

/* Functions (kernels) and their launches. */
void* wh_guest_module_of(void* fn);
const char* wh_guest_function_name(void* fn);
int wh_guest_launch(void* fn, const unsigned grid[3], const unsigned block[3], unsigned shared, void* stream,
                    void** args, const void* params, size_t bytes, int packed, unsigned flags);
int wh_guest_function_attributes(void* fn, struct cudaFuncAttributes* attr);
int wh_guest_function_set_max_dynamic_shared(void* fn, int bytes);
int wh_guest_function_param(void* fn, size_t index, size_t* offset, size_t* size);

/* The allocation a device pointer falls in. */
int wh_guest_allocation_of(uint64_t p, uint64_t* base, uint64_t* bytes);

#ifdef __cplusplus
}
#endif

#endif
