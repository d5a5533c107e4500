#!/usr/bin/env python3
"""Runs Numba's own CUDA test suite (numba.cuda.tests) on Wormhole and checks
the outcome against a list of exclusions.

Each test module runs in a process of its own (a kernel fault is sticky for
the process, as on a GPU, so one module cannot spoil the next), under the
Python this script runs with; run it through wormhole-run. Tests named in the
exclusion file (with their causes) are not run: they are features the sim
device lacks. Everything that runs must pass or be skipped by Numba itself.

  numba_suite.py [--modules FILE | --all] [--exclude FILE] [--jobs N]
                 [--min-pass N] [--max-skip N] [--json OUT] [--logs DIR]
                 [--check-excluded]

--modules FILE: test modules or test ids relative to numba.cuda.tests, one a
line (cudapy.test_array, cudapy.test_sm.TestSharedMemory.test_shared_bool);
--all: every module of cudapy and cudadrv. --check-excluded runs the
excluded tests too, each module's in one more process, and reports those
that pass (the list is then out of date: exit 1).
"""
import argparse
import concurrent.futures
import json
import os
import subprocess
import sys
import time

ROOT = "numba.cuda.tests."
MARK = "@@numba_suite@@ "


def read_list(path):
    """Lines without comments; an exclusion's cause follows a '#'."""
    out = {}
    with open(path) as f:
        for line in f:
            item, _, cause = line.partition("#")
            item = item.strip()
            if item:
                out[item] = cause.strip()
    return out


def all_modules():
    import importlib.util

    spec = importlib.util.find_spec("numba.cuda.tests")
    base = os.path.dirname(spec.origin)
    mods = []
    for pkg in ("cudadrv", "cudapy"):
        for name in sorted(os.listdir(os.path.join(base, pkg))):
            if name.startswith("test_") and name.endswith(".py"):
                mods.append(pkg + "." + name[:-3])
    return mods


def child(selectors, excluded, only_excluded):
    """Runs the tests `selectors` name; one MARK line of JSON per test."""
    import unittest

    try:
        from _pytest.outcomes import Skipped as PytestSkipped
    except ImportError:  # pragma: no cover
        PytestSkipped = ()

    def short(test):
        tid = test.id()
        return tid[len(ROOT):] if tid.startswith(ROOT) else tid

    def flatten(suite):
        for t in suite:
            if isinstance(t, unittest.TestSuite):
                yield from flatten(t)
            else:
                yield t

    def is_excluded(tid):
        parts = tid.split(".")
        return any(".".join(parts[:i]) in excluded for i in range(1, len(parts) + 1))

    class Result(unittest.TestResult):
        failed = set()

        def stopTest(self, test):
            # Excluded tests: an error a launch left behind (launches are
            # posted; a test that never synchronises would not see it) is
            # that test's failure.
            if only_excluded and short(test) not in self.failed:
                try:
                    from numba import cuda

                    cuda.synchronize()
                except Exception as e:  # noqa: BLE001
                    self.failed.add(short(test))
                    print(MARK + json.dumps({"id": short(test), "outcome": "error",
                                             "detail": "after the test: " + str(e)}), flush=True)
            super().stopTest(test)

        def emit(self, test, outcome, detail=""):
            if outcome in ("fail", "error"):
                self.failed.add(short(test))
            print(MARK + json.dumps({"id": short(test), "outcome": outcome, "detail": detail[-4000:]}), flush=True)

        def addSuccess(self, test):
            self.emit(test, "pass")

        def addFailure(self, test, err):
            self.emit(test, "fail", self._exc_info_to_string(err, test))

        def addError(self, test, err):
            # pytest.importorskip raises pytest's Skipped, a skip under pytest.
            if PytestSkipped and isinstance(err[1], PytestSkipped):
                self.emit(test, "skip", str(err[1]))
            else:
                self.emit(test, "error", self._exc_info_to_string(err, test))

        def addSkip(self, test, reason):
            self.emit(test, "skip", reason)

        def addExpectedFailure(self, test, err):
            self.emit(test, "xfail")

        def addUnexpectedSuccess(self, test):
            self.emit(test, "xpass")

        def addSubTest(self, test, subtest, err):
            if err is not None:
                kind = "fail" if issubclass(err[0], test.failureException) else "error"
                self.emit(subtest, kind, self._exc_info_to_string(err, test))

    loader = unittest.TestLoader()
    suite = unittest.TestSuite()
    for sel in selectors:
        try:
            tests = list(flatten(loader.loadTestsFromName(ROOT + sel)))
        except PytestSkipped as e:  # pytest.skip at module level
            print(MARK + json.dumps({"id": sel, "outcome": "skip", "detail": str(e)}), flush=True)
            continue
        for t in tests:
            if is_excluded(short(t)) == only_excluded:
                suite.addTest(t)
            elif not only_excluded:
                print(MARK + json.dumps({"id": short(t), "outcome": "excluded"}), flush=True)
    suite.run(Result())


def run_group(args, selectors, excluded, only_excluded, tag):
    cmd = [sys.executable, os.path.abspath(__file__), "--child", json.dumps(selectors), json.dumps(sorted(excluded))]
    if only_excluded:
        cmd.append("--only-excluded")
    start = time.time()
    results, timed_out = [], False
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout)
        out, err, rc = p.stdout, p.stderr, p.returncode
    except subprocess.TimeoutExpired as e:
        out = e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
        err = e.stderr.decode() if isinstance(e.stderr, bytes) else (e.stderr or "")
        rc, timed_out = -1, True
    text = []
    for line in out.splitlines():
        if line.startswith(MARK):
            results.append(json.loads(line[len(MARK):]))
        else:
            text.append(line)
    if args.logs:
        with open(os.path.join(args.logs, tag + ".log"), "w") as f:
            f.write("\n".join(text) + "\n" + err)
    if timed_out or (rc != 0 and not results):
        why = "timed out after %d s" % args.timeout if timed_out else "exited with %d" % rc
        results.append({"id": tag, "outcome": "error", "detail": why + "\n" + err[-4000:]})
    return tag, results, time.time() - start


def main():
    if len(sys.argv) >= 4 and sys.argv[1] == "--child":
        child(json.loads(sys.argv[2]), set(json.loads(sys.argv[3])), "--only-excluded" in sys.argv[4:])
        return 0
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--modules")
    ap.add_argument("--all", action="store_true")
    ap.add_argument("--exclude")
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--timeout", type=int, default=900, help="seconds per module")
    ap.add_argument("--min-pass", type=int, default=0)
    ap.add_argument("--max-skip", type=int, default=None)
    ap.add_argument("--json")
    ap.add_argument("--logs")
    ap.add_argument("--check-excluded", action="store_true")
    args = ap.parse_args()
    excluded = read_list(args.exclude) if args.exclude else {}
    if args.all:
        selectors = all_modules()
    elif args.modules:
        selectors = list(read_list(args.modules))
    else:
        ap.error("--modules FILE or --all")
    if args.logs:
        os.makedirs(args.logs, exist_ok=True)
    # One process per module; test ids of one module share it.
    groups = {}
    for sel in selectors:
        groups.setdefault(".".join(sel.split(".")[:2]), []).append(sel)
    start = time.time()
    counts = {k: 0 for k in ("pass", "fail", "error", "skip", "xfail", "xpass", "excluded")}
    bad, revived, per_module = [], [], {}
    jobs = [(tag, sels, False) for tag, sels in groups.items()]
    if args.check_excluded:
        for tag, sels in groups.items():
            if any(e == tag or e.startswith(tag + ".") or tag.startswith(e + ".") for e in excluded):
                jobs.append((tag + ".excluded", sels, True))
    with concurrent.futures.ThreadPoolExecutor(max(1, args.jobs)) as pool:
        futs = [pool.submit(run_group, args, sels, set(excluded), only, tag) for tag, sels, only in jobs]
        for fut in concurrent.futures.as_completed(futs):
            tag, results, secs = fut.result()
            n = {}
            if tag.endswith(".excluded"):
                passed = [r["id"] for r in results if r["outcome"] == "pass"]
                failed = {r["id"] for r in results if r["outcome"] in ("fail", "error")}
                revived += [t for t in passed if t not in failed]
                n = {"excluded_passed": len([t for t in passed if t not in failed])}
                results = []
            for r in results:
                o = r["outcome"]
                counts[o] += 1
                n[o] = n.get(o, 0) + 1
                if o in ("fail", "error", "xpass"):
                    bad.append(r)
            per_module[tag] = {"seconds": round(secs, 1), **n}
            print("%-55s %6.1f s  %s" % (tag, secs, " ".join("%s=%d" % kv for kv in sorted(n.items()))), flush=True)
    total = time.time() - start
    ran = counts["pass"] + counts["fail"] + counts["error"] + counts["xfail"] + counts["xpass"]
    print("\n%d tests ran in %.0f s: %d passed, %d failed, %d errors, %d skipped by Numba, %d expected "
          "failures; %d excluded (not run)" % (ran, total, counts["pass"], counts["fail"], counts["error"],
                                              counts["skip"], counts["xfail"], counts["excluded"]))
    for r in bad:
        print("\nUNEXPECTED %s: %s\n%s" % (r["outcome"].upper(), r["id"], r.get("detail", "")))
    for tid in revived:
        print("EXCLUDED BUT PASSES: %s (%s)" % (tid, excluded.get(tid, "")))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"counts": counts, "seconds": round(total, 1), "modules": per_module,
                       "unexpected": [r["id"] for r in bad], "excluded_but_pass": revived}, f, indent=1)
    ok = not bad and not revived and counts["pass"] >= args.min_pass
    if args.max_skip is not None and counts["skip"] > args.max_skip:
        print("FAIL: %d skipped, more than %d" % (counts["skip"], args.max_skip))
        ok = False
    if counts["pass"] < args.min_pass:
        print("FAIL: %d passed, fewer than %d" % (counts["pass"], args.min_pass))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
