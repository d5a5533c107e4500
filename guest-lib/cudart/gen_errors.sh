#!/bin/sh
# Generates the cudaError_t name table from the toolkit's driver_types.h.
# Usage: gen_errors.sh <driver_types.h> <out.inc>
awk '/enum __device_builtin__ cudaError/,/^};/' "$1" |
  sed -n 's/^[[:space:]]*\(cudaError[A-Za-z0-9_]*\)[[:space:]]*=[[:space:]]*\([0-9]*\).*/  {\2, "\1"},/p' > "$2.tmp" && mv "$2.tmp" "$2"
