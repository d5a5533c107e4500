/* Prints the TSC. Under Bochs (clock: sync=none) the TSC advances one tick
 * per emulated instruction slot, so differences count instructions. */
#include <stdio.h>
#include <x86intrin.h>
int main(void) { printf("%llu\n", (unsigned long long)__rdtsc()); return 0; }
