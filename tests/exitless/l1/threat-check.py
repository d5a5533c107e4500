#!/usr/bin/env python3
"""Threat-model checks of the exitless chain bed, from its console log.

Reads what L1 logged at the threat-model marks (WH-GATESTATS: the server's
gate counters; WH-TRACE: KVM's traced VMFUNC exits and #UD injections) and
what the hostile process / module said they caused, prints one
"WH-RESULT NAME PASS|FAIL detail" line per derived check, then requires a
PASS line for every threat-model check (a check that did not run fails).
Exit status: 0 when all passed.
Usage: threat-check.py console.log
"""
import re
import sys

REQUIRED = [
    # T1: the hostile process (tests/exitless/l1/hostile.c)
    "hostile_setup", "hostile_bind_victim_generation", "hostile_call_after_refused_bind",
    "hostile_bind_forged_generation", "hostile_bind_unknown_channel", "hostile_call_unbound",
    "hostile_slot_too_short", "hostile_slot_bad_magic", "hostile_slot_bad_kind",
    "hostile_slot_length_past_slot", "hostile_slot_bad_opcode", "hostile_slot_response_flag",
    "hostile_slot_bind_trailing", "hostile_ioctl_bad_op", "hostile_ioctl_oversize", "hostile_ioctl_bad_buffer",
    "hostile_devmem_state_read", "hostile_devmem_state_write", "hostile_devmem_channel_read",
    "hostile_devmem_desc_write", "hostile_devmem_code_write", "hostile_devmem_desc_magic_write",
    "hostile_gate_still_works", "hostile_bar_past_end", "hostile_unprivileged", "hostile_process",
    "threat_good_client", "threat_server_counters",
    # T2: the hostile kernel (tests/exitless/l1/hostile_kmod.c)
    "kernel_vmfunc_own_ept", "kernel_vmfunc_index_600", "kernel_vmfunc_empty_index", "kernel_vmfunc_leaf_1",
    "kernel_vmwrite", "kernel_msr_491", "kernel_msr_48b", "kernel_hypercall_5748", "kernel_hypercall_5749",
    "kernel_hypercall_574a", "kernel_hypercall_3e8", "kernel_desc_write", "kernel_desc_view_index_write",
    "kernel_code_write", "kernel_eptp_list_scan", "hostile_kernel", "threat_l1_vmfunc_refused",
    # afterwards
    "threat_after", "threat_after_transport",
    # last, ending the VM: the gate's store redirected onto a read-only view page
    "view_write_refused",
]


def main() -> int:
    text = open(sys.argv[1], encoding="utf-8", errors="replace").read()
    lines = text.splitlines()
    out = []

    def result(name, ok, detail):
        out.append(f"WH-RESULT {name} {'PASS' if ok else 'FAIL'} {detail}")

    stats = {}
    for ln in lines:
        m = re.search(r"WH-GATESTATS (\S+) .*?(\d+) binds, (\d+) refused, (\d+) violations", ln)
        if m:
            stats[m.group(1)] = tuple(int(x) for x in m.group(2, 3, 4))
    exp = re.search(r"hostile: expect refused=(\d+) violations=(\d+) binds=(\d+)", text)
    a, b = stats.get("threat-process-begin"), stats.get("threat-process-end")
    if a and b and exp:
        d = tuple(y - x for x, y in zip(a, b))
        want = (int(exp.group(3)) + 1, int(exp.group(1)), int(exp.group(2)))  # + the victim's own BIND
        result("threat_server_counters", d == want,
               f"server gate counters over the hostile phase: binds +{d[0]}, refused +{d[1]}, violations +{d[2]} "
               f"(want +{want[0]} = the victim's own bind, +{want[1]}, +{want[2]})")
    else:
        result("threat_server_counters", False, f"missing counters (begin {a}, end {b}, expectation {bool(exp)})")

    tr = {}
    for ln in lines:
        m = re.search(r"WH-TRACE (\S+) vmfunc_exits=(\d+) ud_injected=(\d+)", ln)
        if m:
            tr[m.group(1)] = (int(m.group(2)), int(m.group(3)))
    ev = re.search(r"wh-hostile: vmfunc exits expected (\d+)", text)
    a, b = tr.get("threat-process-end"), tr.get("threat-kernel-end")  # T2 begins at T1's end mark
    if a and b and ev:
        n, ud = b[0] - a[0], b[1] - a[1]
        want = int(ev.group(1))
        result("threat_l1_vmfunc_refused", n == want and ud >= want,
               f"L1 KVM traced {n} VMFUNC exits (want {want}) and injected {ud} #UD (want >= {want}) "
               f"while the hostile module ran; {b[0]} VMFUNC exits in the whole run")
    else:
        result("threat_l1_vmfunc_refused", False, f"missing trace counts (begin {a}, end {b}, expectation {bool(ev)})")

    for o in out:
        print(o)
    allres = text + "\n" + "\n".join(out)
    fail = 0
    for r in REQUIRED:
        if not re.search(rf"WH-RESULT {re.escape(r)} PASS", allres):
            print(f"chain: missing PASS for {r}")
            fail = 1
    for ln in out:
        if " FAIL " in ln + " ":
            fail = 1
    return fail


if __name__ == "__main__":
    sys.exit(main())
