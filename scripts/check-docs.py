#!/usr/bin/env python3
"""Checks that the manual tells the truth about itself and the code.

README.md and docs/*.md: every relative link names a file that exists and,
with #anchor, a heading of that file (GitHub's anchor rules); every
WORMHOLE_* variable and every --option written in code spans or code blocks
exists in the sources (a program, script or build file that is not a doc).
Exit 1 with one line per problem.  Usage: check-docs.py [REPO]
"""
import os
import re
import subprocess
import sys

repo = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), ".."))
docs = ["README.md"] + sorted("docs/" + f for f in os.listdir(os.path.join(repo, "docs")) if f.endswith(".md"))


def slug(heading):
    s = heading.strip().lower()
    s = re.sub(r"[^\w\- ]", "", s)  # punctuation goes, word characters, '-' and spaces stay
    return s.replace(" ", "-")


def anchors(path):
    out, seen, fence = set(), {}, False
    for line in open(path, encoding="utf-8"):
        if line.startswith("```"):
            fence = not fence
        if fence:
            continue
        m = re.match(r"#{1,6}\s+(.*?)\s*#*\s*$", line)
        if m:
            a = slug(re.sub(r"`", "", m.group(1)))
            n = seen.get(a, 0)
            seen[a] = n + 1
            out.add(a if n == 0 else f"{a}-{n}")
    return out


files = subprocess.run(["git", "-C", repo, "ls-files"], capture_output=True, text=True, check=True).stdout.split()
code_exts = (".cpp", ".hpp", ".h", ".c", ".cu", ".cuh", ".sh", ".py", ".cmake", ".txt", ".mk", ".in", ".def",
             ".service", ".toml", ".conf", ".tsv")
source = ""
for f in files:
    if f.endswith(".md") or not (f.endswith(code_exts) or os.path.basename(f) in ("Makefile", "wormhole-run")):
        continue
    try:
        source += open(os.path.join(repo, f), encoding="utf-8", errors="replace").read()
    except OSError:
        pass

# Options of other programs that the docs show in passing.
OTHER_PROGRAMS = {"--test-dir",  # ctest
                  "--port"}      # an example server command line (docs/compare.md)

problems = []
for d in docs:
    path = os.path.join(repo, d)
    text = open(path, encoding="utf-8").read()
    # Links: [text](target) outside code.
    prose = re.sub(r"```.*?```", "", text, flags=re.S)
    prose = re.sub(r"`[^`\n]*`", "", prose)
    for target in re.findall(r"\]\(([^)\s]+)\)", prose):
        if re.match(r"[a-z]+://|mailto:", target):
            continue
        file, _, anchor = target.partition("#")
        dest = os.path.normpath(os.path.join(os.path.dirname(path), file)) if file else path
        if not os.path.exists(dest):
            problems.append(f"{d}: link to {target}: no file {os.path.relpath(dest, repo)}")
        elif anchor and dest.endswith(".md") and anchor not in anchors(dest):
            problems.append(f"{d}: link to {target}: no heading #{anchor} in {os.path.relpath(dest, repo)}")
    # Names in code: spans and blocks.
    code = " ".join(re.findall(r"```.*?```", text, flags=re.S) + re.findall(r"`([^`\n]*)`", text))
    for var in sorted(set(re.findall(r"\bWORMHOLE_[A-Z0-9_]*[A-Z0-9]\b", code))):
        if var not in source:
            problems.append(f"{d}: {var} is named but no source reads it")
    for opt in sorted(set(re.findall(r"(?<![\w-])--[a-z][a-z0-9]*(?:-[a-z0-9]+)+\b|(?<![\w-])--[a-z]{3,}\b", code))):
        if opt not in source and opt not in OTHER_PROGRAMS:
            problems.append(f"{d}: option {opt} is named but appears in no source")

for p in problems:
    print(p)
print(f"check-docs: {len(docs)} pages, {len(problems)} problems")
sys.exit(1 if problems else 0)
