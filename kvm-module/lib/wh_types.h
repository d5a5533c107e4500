/* SPDX-License-Identifier: GPL-2.0 OR MIT */
/*
 * Wormhole exitless switch: portability shim so that the same pure-logic C
 * compiles inside arch/x86/kvm (kernel) and in the user-space unit tests.
 */
#ifndef WH_TYPES_H
#define WH_TYPES_H

#ifdef __KERNEL__
#include <linux/types.h>
#include <linux/errno.h>
#include <linux/string.h>
typedef u64 wh_u64;
typedef u32 wh_u32;
typedef u16 wh_u16;
#else
#include <stdint.h>
#include <stdbool.h>
#include <stddef.h>
#include <errno.h>
#include <string.h>
typedef uint64_t wh_u64;
typedef uint32_t wh_u32;
typedef uint16_t wh_u16;
#endif

#endif
