#!/usr/bin/env python3
"""The build's check of the API tables (docs/ARCHITECTURE.md, "Adding a
forwarded function"): every operation of every table has

  - its handler: `on_<Name>` in its library's service (libs/<name>/server/)
    or, for the session's own tables, in host-server/session/src/;
  - for each backend method its handler calls (a virtual of the library's
    seam, libs/<name>/include/wormhole/server/, or of backend.hpp), a body
    on the sim device and one on the cuda backend (an `override` in sim/ and
    cuda/, or in host-server/backend/src/sim_*.cpp and cuda_*.cpp);
  - a test: a file under tests/ names the operation (Op::<Name>,
    <Name>Req) or one of the guest's exported functions that send it.

and no guest source includes a server header (wormhole/server/...).

An exception is written in the table's .def, with its reason, as a line
    // check: <Name> sim-only <method>   (the seam's default body serves the
                                         cuda backend: nothing to do there,
                                         or not supported)
    // check: <Name> no-backend <method> (a seam method the handler names, not a device body)
and is itself checked (an exception that no longer applies is an error).

Usage: check-spec.py [-v] SOURCE_DIR [STAMP]   (exit 1 and one line per problem;
       -v: what was found for each operation)
"""
import glob
import os
import re
import sys

args = [a for a in sys.argv[1:] if a != "-v"]
verbose = "-v" in sys.argv[1:]
root = args[0]
stamp = args[1] if len(args) > 1 else None


def read(p):
    with open(p, encoding="utf-8", errors="replace") as f:
        return f.read()


def files(*patterns):
    out = []
    for p in patterns:
        out += sorted(glob.glob(os.path.join(root, p), recursive=True))
    return out


OP_LINE = re.compile(r"^\s*X\((\w+),\s*(Sync|Posted|Either)\b", re.M)
CHECK_LINE = re.compile(r"^//\s*check:\s*(\w+)\s+(sim-only|no-backend)\s+(\w+)", re.M)


def tables():
    """(def file, {handlers, seam, sim, cuda}: the files of each) per table."""
    core = dict(
        handlers=files("host-server/session/src/*.cpp"),
        seam=files("host-server/backend/include/wormhole/server/backend.hpp"),
        sim=files("host-server/backend/src/sim_*.cpp"),
        cuda=files("host-server/backend/src/cuda_*.cpp"),
    )
    for d in files("proto/include/wormhole/proto/*_api.def"):
        yield d, core
    for d in files("libs/*/*_api.def"):
        lib = os.path.dirname(d)
        yield d, dict(
            handlers=glob.glob(os.path.join(lib, "server", "*.cpp")),
            seam=glob.glob(os.path.join(lib, "include", "wormhole", "server", "*.hpp")),
            sim=glob.glob(os.path.join(lib, "sim", "*.cpp")),
            cuda=glob.glob(os.path.join(lib, "cuda", "*.cpp")),
        )


def strip_comments(text):
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    return re.sub(r"//[^\n]*", " ", text)


def virtuals(headers):
    names = set()
    for h in headers:
        for m in re.finditer(r"\bvirtual\b[^;{(]*?\b(\w+)\s*\(", strip_comments(read(h))):
            if not m.group(1).startswith("~"):
                names.add(m.group(1))
    return names


def overrides(paths):
    text = "".join(strip_comments(read(p)) for p in paths)
    return set(re.findall(r"\b(\w+)\s*\([^{};]*\)\s*(?:const\s*)?(?:noexcept\s*)?override\b", text))


def handler_bodies(paths):
    """on_Name -> the text of its definition."""
    bodies = {}
    for p in paths:
        text = strip_comments(read(p))
        for m in re.finditer(r"^[^\s#].*?::on_(\w+)\s*\(", text, re.M):
            end = re.compile(r"^}", re.M).search(text, m.end())
            bodies[m.group(1)] = text[m.start():end.end() if end else len(text)]
    return bodies


def guest_senders():
    """Op name -> exported functions of the guest that send it (through at
    most three helpers of the same file)."""
    senders = {}
    # A function's first line: its name, then an open parameter list or a
    # whole one-line body.
    header = re.compile(r"^(?![\s#/}])[^;=]*?\b(\w+)\s*\((?:[^;]*$|[^;{]*\)\s*(?:const\s*)?\{.*\}\s*$)")
    for p in files("guest-lib/**/*.cpp", "libs/*/guest/**/*.cpp", "libs/*/guest/**/*.hpp", "guest-lib/**/*.hpp"):
        lines = strip_comments(read(p)).split("\n")
        owner = [None] * len(lines)  # enclosing function of each line
        text_by_owner = {}
        cur = None
        for i, line in enumerate(lines):
            m = header.match(line)
            if m and m.group(1) not in ("if", "for", "while", "switch", "return"):
                cur = m.group(1)
            owner[i] = cur
            if cur:
                text_by_owner.setdefault(cur, []).append(line)
        bodies = {k: "\n".join(v) for k, v in text_by_owner.items()}

        def exported(fn, depth):
            if re.match(r"(cu|cuda|cublas|cufft|curand|cudnn|nvrtc|nvJitLink|nvml|__cuda)\w*$", fn) and not fn.startswith("cuda_"):
                return {fn}
            if depth == 0:
                return set()
            out = set()
            for other, body in bodies.items():
                if other != fn and re.search(r"\b" + re.escape(fn) + r"\s*[(<]", body):
                    out |= exported(other, depth - 1)
            return out

        for i, line in enumerate(lines):
            for op in re.findall(r"Op::(\w+)", line):
                if owner[i]:
                    senders.setdefault(op, set()).update(exported(owner[i], 3))
    return senders


def layering():
    """The guest never includes the server's headers: a drop-in includes its
    own files, the guest tier (guest-lib/cudart/include), proto/ and the
    libraries' include/wormhole/proto/ only."""
    out = []
    for p in files("guest-lib/**/*.cpp", "guest-lib/**/*.hpp", "guest-lib/**/*.h", "libs/*/guest/**/*.cpp",
                   "libs/*/guest/**/*.hpp"):
        for n, line in enumerate(read(p).split("\n"), 1):
            m = re.match(r'\s*#\s*include\s*"([^"]+)"', line)
            if m and (m.group(1).startswith("wormhole/server/") or "host-server" in m.group(1)):
                out.append(f"{os.path.relpath(p, root)}:{n}: the guest includes the server's {m.group(1)}")
    return out


def main():
    problems = layering()
    # The fuzzers name every operation without checking any result, and the
    # opcode test names a few for their numbers: neither tests one.
    test_text = "".join(
        read(p)
        for p in files("tests/**/*.cpp", "tests/**/*.cu", "tests/**/*.cuh", "tests/**/*.hpp", "tests/**/*.py", "tests/**/*.sh")
        if "/fuzz/" not in p and "/tests/proto/" not in p
    )
    test_words = set(re.findall(r"\w+", test_text))
    senders = guest_senders()
    nops = 0
    for deffile, where in tables():
        rel = os.path.relpath(deffile, root)
        text = read(deffile)
        ops = OP_LINE.findall(text)
        marks = {(n, kind, meth) for n, kind, meth in CHECK_LINE.findall(text)}
        used_marks = set()
        seam = virtuals(where["seam"])
        sim, cuda = overrides(where["sim"]), overrides(where["cuda"])
        bodies = handler_bodies(where["handlers"])
        for name, _kind in ops:
            nops += 1
            body = bodies.get(name)
            if body is None:
                problems.append(f"{rel}: {name} has no handler (on_{name} in its service)")
                continue
            called = set(re.findall(r"(?:->|\.|&\w+::)(\w+)\s*[(,)]", body)) & seam
            for meth in sorted(called):
                if (name, "no-backend", meth) in marks:
                    used_marks.add((name, "no-backend", meth))
                    continue
                if meth not in sim:
                    problems.append(f"{rel}: {name} calls {meth}, which has no sim body (an override in sim/)")
                if meth not in cuda:
                    if (name, "sim-only", meth) in marks:
                        used_marks.add((name, "sim-only", meth))
                    else:
                        problems.append(f"{rel}: {name} calls {meth}, which has no cuda body (an override in cuda/; "
                                        f"or mark it: // check: {name} sim-only {meth})")
            sent_by = senders.get(name, set())
            refs = {name, name + "Req"} | sent_by | {f[:-3] for f in sent_by if f.endswith("_v2")}
            if verbose:
                print(f"{rel}: {name}: backend {sorted(called) or '-'}; tested by "
                      f"{sorted(refs & test_words) or '-'}")
            if not refs & test_words:
                problems.append(f"{rel}: {name} has no test: no file under tests/ names Op::{name}, {name}Req "
                                f"or a function that sends it ({', '.join(sorted(senders.get(name, []))) or 'none found'})")
        for m in sorted(marks - used_marks):
            problems.append(f"{rel}: '// check: {' '.join(m)}' no longer applies: remove it")
    for p in problems:
        print("check-spec:", p)
    if problems:
        return 1
    print(f"check-spec: {nops} operations: each has its handler, its sim and cuda bodies and a test")
    if stamp:
        with open(stamp, "w") as f:
            f.write("ok\n")
    return 0


sys.exit(main())
