/* Exit-based doorbell for the chain bed's comparison (runs in L2): writes the
 * doorbell register of the first ivshmem device (BAR0 + 12, an MMIO write
 * that always exits to the VMM) N times and prints the p50 in ns.
 * Usage: exitpath N */
#include <dirent.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

static int cmp(const void *a, const void *b) {
  long x = *(const long *)a, y = *(const long *)b;
  return x < y ? -1 : x > y;
}
static long now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec * 1000000000L + t.tv_nsec; }

int main(int argc, char **argv) {
  int n = argc > 1 ? atoi(argv[1]) : 1000;
  char path[512] = "";
  DIR *d = opendir("/sys/bus/pci/devices");
  struct dirent *e;
  while (d && (e = readdir(d))) {
    char f[400], v[32] = "", id[32] = "";
    FILE *fp;
    snprintf(f, sizeof f, "/sys/bus/pci/devices/%s/vendor", e->d_name);
    if ((fp = fopen(f, "r"))) { fgets(v, sizeof v, fp); fclose(fp); }
    snprintf(f, sizeof f, "/sys/bus/pci/devices/%s/device", e->d_name);
    if ((fp = fopen(f, "r"))) { fgets(id, sizeof id, fp); fclose(fp); }
    if (!strncmp(v, "0x1af4", 6) && !strncmp(id, "0x1110", 6)) {
      snprintf(path, sizeof path, "/sys/bus/pci/devices/%s/resource0", e->d_name);
      break;
    }
  }
  if (!path[0]) { fprintf(stderr, "exitpath: no ivshmem device\n"); return 1; }
  int fd = open(path, O_RDWR | O_SYNC);
  volatile uint32_t *r = fd < 0 ? MAP_FAILED : mmap(0, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (r == MAP_FAILED) { perror(path); return 1; }
  long *ns = calloc(n, sizeof *ns);
  for (int i = 0; i < n; i++) {
    long t0 = now();
    r[3] = 0;   /* DOORBELL: peer 0, vector 0 (no peers: QEMU drops it) */
    ns[i] = now() - t0;
  }
  qsort(ns, n, sizeof *ns, cmp);
  printf("doorbell x%d: p50 %ld ns, p99 %ld ns\n", n, ns[n / 2], ns[n * 99 / 100]);
  printf("PASS exitpath\n");
  return 0;
}
