#!/usr/bin/env python3
"""Summarises an ab.sh SOAK log: per dither mode and placement of the two
vCPUs (by the bare floor's mean: near <= 80 ns, usual <= 250, far above),
B - A in the means of each run, and how many runs had each build's p50
within 1.5 x the bare p50 (issue 2's target).

Log lines, one run each: 'ab d=D <ab_main output>' (first variant A) or
'ba d=D <ab_main output>' (the binary built the other way round: its
first variant is B)."""
import re
import statistics
import sys

CLASSES = (("near", 0, 80), ("usual", 81, 250), ("far", 251, 10**9))


def parse(path):
    runs = []
    for line in open(path):
        m = re.match(r"(ab|ba) d=(\d) bare=(\d+)/(\d+)\S* A=(\d+)/(\d+)\S* B=(\d+)/(\d+)", line)
        if not m:
            continue
        order, d, bp50, bmean, x50, xmean, y50, ymean = m.groups()
        a, b = ((x50, xmean), (y50, ymean)) if order == "ab" else ((y50, ymean), (x50, xmean))
        runs.append((int(d), int(bp50), int(bmean), int(a[0]), int(a[1]), int(b[0]), int(b[1])))
    return runs


def main():
    runs = parse(sys.argv[1])
    if not runs:
        sys.exit("soak_summary.py: no runs in " + sys.argv[1])
    for d in (0, 1):
        for name, lo, hi in CLASSES:
            r = [x for x in runs if x[0] == d and lo <= x[2] <= hi]
            if not r:
                continue
            diff = [x[6] - x[4] for x in r]
            print(f"{'dithered  ' if d else 'undithered'} {name:5} runs={len(r):3} "
                  f"floor~{statistics.mean(x[2] for x in r):.0f}ns "
                  f"A~{statistics.mean(x[4] for x in r):.1f} B~{statistics.mean(x[6] for x in r):.1f} "
                  f"B-A median {statistics.median(diff):+.1f}ns "
                  f"(B lower {sum(v < 0 for v in diff)}, higher {sum(v > 0 for v in diff)}) "
                  f"p50<=1.5x: A {sum(x[3] <= 1.5 * x[1] for x in r)} B {sum(x[5] <= 1.5 * x[1] for x in r)}")


if __name__ == "__main__":
    main()
