/* Shared between the test VMM and the test guest. */
#ifndef WH_BED_GUEST_H
#define WH_BED_GUEST_H
#define BED_GATE_GPA 0x1000000000ull /* G = 64 GiB, 2 MiB aligned          */
#define BED_RAM_SIZE 0x200000ull     /* 2 MiB of guest RAM at GPA 0        */
#define BED_GUEST_LOAD 0x10000ull    /* test guest code, flat binary       */
#define BED_PML4 0x1000ull           /* guest's own page tables            */
#define BED_STACK_TOP 0x80000ull
#define BED_PORT 0x500               /* outl(step), outl(value) pairs      */
#define BED_PORT_VAL 0x504
#define BED_STATE_MAGIC 0x5354415445535256ull /* "VRSETATS" */
/* steps the guest reports, in order */
enum {
	S_START = 1, S_NOP, S_SUBMIT, S_POLL, S_QUERY, S_SUBMIT2, S_BUSY,
	S_BADARGS, S_BADINDEX, S_READ_SERVER, S_WRITE_CODE, S_RAW_VMFUNC,
	S_TIMING, S_DETACH_REQ, S_AFTER_DETACH, S_DONE
};
#endif
