#!/bin/sh
# Generates the CUresult name table from the toolkit's cuda.h.
# Usage: gen_errors.sh <cuda.h> <out.inc>
awk '/typedef enum cudaError_enum/,/} CUresult;/' "$1" |
  sed -n 's/^[[:space:]]*\(CUDA_[A-Z0-9_]*\)[[:space:]]*=[[:space:]]*\([0-9]*\).*/  {\2, "\1"},/p' > "$2.tmp" && mv "$2.tmp" "$2"
