#!/usr/bin/env python3
"""Threat-model and gate-use checks of the exitless chain bed, from its console log.

Reads what L1 logged at the marks (WH-GATESTATS: the server's gate counters;
WH-TRACE: KVM's traced VMFUNC exits and #UD injections; WH-EXITS: KVM's exit
counters), what the hostile process / module said they caused, and what
gate_client said of its own calls at exit, prints one
"WH-RESULT NAME PASS|FAIL detail" line per derived check, then requires a
PASS line for every required check (a check that did not run fails):
  gate_calls_counted: over the counted gate_client run, the server's count
    of calls served through the gate equals the client's count of calls it
    sent there, and the client made no fallback to the ring;
  gate_exits_per_call: KVM exits per call on the vmfunc path (the difference
    of two run lengths, as exits-table.py) at most MAX_EXITS_PER_CALL.
Exit status: 0 when all passed.
Usage: threat-check.py console.log
"""
import re
import sys

# About 0.2 measured (timer and interrupt exits that scale with run time);
# one exit per call would mean the calls are not exitless.
MAX_EXITS_PER_CALL = 0.5

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
    # the gate's use: counted calls, exits per call
    "gate_calls_counted", "gate_exits_per_call",
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

    # gate_calls_counted: the server's calls served through the gate over the
    # counted run (its gate line at both marks) against the client's report.
    served = {}
    for ln in lines:
        m = re.search(r"WH-GATESTATS (\S+) gate: (\d+) calls served through the gate", ln)
        if m:
            served[m.group(1)] = int(m.group(2))
    cl = re.search(r"\[gate_client\] wormhole: vmfunc: (\d+) synchronous calls, (\d+) through the gate, (\d+) on "
                   r"the ring \((\d+) with a variable-length answer; fallbacks: (\d+) larger than a slot, (\d+) while "
                   r"the slot was busy\)", text)
    a, b = served.get("gate-run-begin"), served.get("gate-run-end")
    if a is not None and b is not None and cl:
        calls, gate, ring, variable, large, busy = (int(x) for x in cl.groups())
        d = b - a
        ok = d == gate and gate > 0 and gate + ring == calls and large + busy == 0
        result("gate_calls_counted", ok,
               f"server served {d} calls through the gate; gate_client made {calls} synchronous calls, {gate} "
               f"through the gate, {ring} on the ring ({variable} with a variable-length answer, fallbacks: "
               f"{large} larger than a slot, {busy} slot busy; want 0)")
    else:
        result("gate_calls_counted", False,
               f"missing counts (server at begin {a}, at end {b}, client report {bool(cl)})")

    # gate_exits_per_call: `gate_client time n` makes 2n calls; the difference
    # of the N1 and N2 runs cancels set-up and the marks' own output.
    snaps = {}
    for ln in lines:
        m = re.search(r"WH-EXITS (\S+) (.*)", ln)
        if m:
            snaps[m.group(1)] = {k: int(v) for k, v in re.findall(r"(\w+)=(\d+)", m.group(2))}
    ns = sorted(int(m.group(1)) for k in snaps if (m := re.match(r"vmfunc-(\d+)-begin$", k))
                and f"vmfunc-{m.group(1)}-end" in snaps)
    if len(ns) >= 2:
        n1, n2 = ns[0], ns[-1]
        d = lambda n: snaps[f"vmfunc-{n}-end"]["exits"] - snaps[f"vmfunc-{n}-begin"]["exits"]
        per = (d(n2) - d(n1)) / (2 * (n2 - n1))
        result("gate_exits_per_call", per <= MAX_EXITS_PER_CALL,
               f"{per:.3f} KVM exits per call on the vmfunc path ({2 * (n2 - n1)} calls compared; "
               f"want <= {MAX_EXITS_PER_CALL})")
    else:
        result("gate_exits_per_call", False, f"missing vmfunc exit counts (runs {ns})")

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
