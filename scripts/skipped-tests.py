#!/usr/bin/env python3
"""Lists the tests ctest skipped, with their reasons, and fails when one of
them must never skip on the project's own machines.

Reads the JUnit file that `ctest --output-junit` wrote (make test writes
BUILD/junit.xml): a test skipped (SKIP_RETURN_CODE, SKIP_REGULAR_EXPRESSION,
a GTest skip) or not run has status "notrun"; its reason is the output line
that says SKIP (or skip), else its last output line, else ctest's message.
The list of tests that must not skip is one name or fnmatch pattern a line
(tests/must-not-skip.txt; '#' starts a comment).
Usage: skipped-tests.py JUNIT.xml MUST-NOT-SKIP.txt
Exit status: 0, or 1 when a listed test skipped (or the file is unreadable)."""
import fnmatch
import re
import sys
import xml.etree.ElementTree as ET


def reason(case):
    out = (case.findtext("system-out") or "").strip().splitlines()
    for ln in reversed(out):  # a sentence that says why, before gtest's bare "[  SKIPPED ]" marker
        if re.search(r"\bskip|\bexclude", ln, re.IGNORECASE) and not re.match(r"\s*\[\s*SKIPPED\s*\]", ln):
            return ln.strip()
    for ln in reversed(out):
        if re.search(r"\bskip", ln, re.IGNORECASE):
            return ln.strip()
    if out:
        return out[-1].strip()
    sk = case.find("skipped")
    return sk.get("message", "") if sk is not None else "not run"


def main() -> int:
    junit, listing = sys.argv[1], sys.argv[2]
    try:
        root = ET.parse(junit).getroot()
    except (OSError, ET.ParseError) as e:
        print(f"skipped tests: cannot read {junit}: {e}")
        return 1
    patterns = []
    for ln in open(listing, encoding="utf-8"):
        ln = ln.split("#", 1)[0].strip()
        if ln:
            patterns.append(ln)
    skipped = [(c.get("name"), reason(c)) for c in root.iter("testcase")
               if c.get("status") == "notrun" or c.find("skipped") is not None]
    if not skipped:
        print("skipped tests: none")
        return 0
    print(f"skipped tests ({len(skipped)}):")
    bad = []
    for name, why in skipped:
        must = any(fnmatch.fnmatchcase(name, p) for p in patterns)
        print(f"  {name}: {why}{'   <- must not skip here' if must else ''}")
        if must:
            bad.append(name)
    if bad:
        print(f"FAIL: {len(bad)} test(s) that must not skip on these machines skipped ({listing}): {' '.join(bad)}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
