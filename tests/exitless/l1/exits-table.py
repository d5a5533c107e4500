#!/usr/bin/env python3
"""Exits and Bochs ticks per call from the chain bed's console log.

L1 prints `WH-EXITS <path>-<n>-begin|end k=v ...` (KVM's debugfs counters
for L2's VM, L1's TSC: Bochs ticks) around `gate_client time n` (2n calls) and
`exitpath 2n` (2n doorbell writes). Per call = (delta at N2 - delta at N1) /
(2 * (N2 - N1)): connection set-up, first touches and the marks' own console
output cancel out. "Other" exits (not I/O, MMIO or hypercalls: timer,
interrupt windows, halts) per 10^6 ticks show what scales with run time.
Usage: exits-table.py console.log"""
import re, sys
snaps = {}
for line in open(sys.argv[1], errors="replace"):
    m = re.match(r"WH-EXITS (\S+) (.*)", line.strip())
    if m:
        snaps[m.group(1)] = {k: int(v) for k, v in re.findall(r"(\w+)=(\d+)", m.group(2))}
runs = {}
for name in snaps:
    m = re.match(r"(\w+)-(\d+)-begin$", name)
    if m and f"{m.group(1)}-{m.group(2)}-end" in snaps:
        runs.setdefault(m.group(1), []).append(int(m.group(2)))
keys = ["exits", "io", "mmio", "halt", "irq", "irq_window", "hypercalls", "insn_emulation"]
print("| path | calls compared | " + " | ".join(f"{k}/call" for k in keys) + " | ticks/call (mean) | other exits per 10^6 ticks |")
print("|---|---|" + "---|" * (len(keys) + 2))
for path, ns in runs.items():
    if len(ns) < 2:
        continue
    n1, n2 = sorted(ns)[:2]
    d = lambda n, k: snaps[f"{path}-{n}-end"].get(k, 0) - snaps[f"{path}-{n}-begin"].get(k, 0)
    calls = 2 * (n2 - n1)
    row = [f"{(d(n2, k) - d(n1, k)) / calls:.3f}" for k in keys]
    ticks = d(n2, "tsc") - d(n1, "tsc")
    other = sum(d(n2, k) - d(n1, k) for k in ("exits",)) - sum(d(n2, k) - d(n1, k) for k in ("io", "mmio", "hypercalls"))
    row += [f"{ticks / calls:.0f}", f"{other / ticks * 1e6:.0f}" if ticks > 0 else "-"]
    print(f"| {path} | {calls} | " + " | ".join(row) + " |")
