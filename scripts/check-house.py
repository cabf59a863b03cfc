#!/usr/bin/env python3
"""The house checks: the layers of ARCHITECTURE.md §2 and the map of docs/architecture.md hold.

    scripts/check-house.py [--src DIR] [--build DIR] [--tap] [CHECK...]

CHECK is any of:
  layers   every #include "dir/..." of a library folder names a header of its own layer or of a
           layer below it (the ranks below, from ARCHITECTURE.md §2);
  calls    in each linked unit (libmscclpp, libmscclpp_nccl, each HAL module), no object calls a
           function defined by an object of a higher layer, and no files of different folders
           call each other in a circle (read from the objects of a build: `nm`);
  config   no library code reads an MSCCLPP_* variable with getenv(): every one is declared in
           base/config_vars.h and read through the table (mscclpp-info lists them);
  vendor   a vendor's header (CUDA, HIP, MPI, UCX, verbs, NCCL: VENDOR_HEADERS) is included only
           where docs/architecture.md's table "Vendor headers" allows it (a file, or a folder and
           what is below it, with the headers named in its row), and every row of that table is
           still used: a new exception fails until the map gives it a row and a reason;
  map      every top-level folder of the tree is on the map of docs/architecture.md ("Layers and
           folders") and every folder the map names exists; every folder of tests/ is in its
           test list ("Tests"); configure's summary has a line per transport folder.
Default: all. Each finding names the files and what ties them. Exit 0 when every check holds;
with --tap, one TAP line per check (a check that cannot run here, e.g. `calls` without a
build, is a skip that says why).
"""
import argparse
import os
import re
import subprocess
import sys

# ARCHITECTURE.md §2: a layer includes only headers of the layers below it (or its own).
# include/ (the public headers), vendor/ (stand-ins for vendors' headers) and base/ are below
# everything; config.h is configure's.
RANKS = {
    "include": -1, "mscclpp": -1, "vendor": -1, "base": 0,
    "kernels": 1,
    "hal": 2,
    "transports": 3,
    "core": 4,
    "executor": 5,
    "nccl": 6, "tools": 6,
}
LIBRARY_DIRS = ["base", "kernels", "hal", "transports", "core", "executor", "nccl", "tools"]
SOURCE_EXT = (".c", ".h", ".cu", ".hip", ".cpp", ".cc")
INCLUDE_RE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
ANY_INCLUDE_RE = re.compile(r'^\s*#\s*include\s*[<"]([^>"]+)[>"]', re.M)
# The headers of the vendors' libraries (fnmatch patterns): CUDA and its libraries, HIP/ROCm,
# MPI, UCX, verbs/rdma-core, NCCL/RCCL.
VENDOR_HEADERS = [
    "cuda*", "cuda/*", "cub/*", "cublas*", "cufft*", "curand*", "cupti*", "nvml.h", "nvrtc.h",
    "nvtx*", "nvToolsExt*", "hip/*", "hsa/*", "rocm*", "roctracer/*", "rocprofiler*",
    "mpi.h", "mpi_*.h", "mpi-ext.h", "ucp/*", "ucs/*", "uct/*", "infiniband/*", "rdma/*",
    "nccl*.h", "rccl*", "rccl/*",
]
VENDOR_SCAN_EXT = SOURCE_EXT + (".cuh", ".hpp", ".hh")


def tracked_files(src):
    """The tree's files: git's list when it is a checkout, else a walk without build output."""
    try:
        top = subprocess.run(["git", "-C", src, "rev-parse", "--show-toplevel"],
                             capture_output=True, text=True, check=True).stdout.strip()
        if os.path.realpath(top) != os.path.realpath(src):
            raise OSError("not the top of a checkout")  # e.g. a tarball unpacked in a checkout
        out = subprocess.run(["git", "-C", src, "ls-files", "--cached", "--others",
                              "--exclude-standard"], capture_output=True, text=True,
                             check=True).stdout.split("\n")
        files = [f for f in out if f and os.path.exists(os.path.join(src, f))]
        if files:
            return files
    except (OSError, subprocess.CalledProcessError):
        pass
    files = []
    skip = {"autom4te.cache", ".libs", ".deps", "__pycache__"}
    for root, dirs, names in os.walk(src):
        dirs[:] = [d for d in dirs if not d.startswith(".") and d not in skip
                   and not (root == src and re.match(r"_?build($|-)(?!aux$)", d))]
        files += [os.path.relpath(os.path.join(root, n), src) for n in names]
    return files


def rank_of(path):
    return RANKS.get(path.split("/", 1)[0])


def check_layers(src, files):
    bad = []
    for f in files:
        top = f.split("/", 1)[0]
        if top not in LIBRARY_DIRS or not f.endswith(SOURCE_EXT):
            continue
        with open(os.path.join(src, f), encoding="utf-8", errors="replace") as fh:
            text = fh.read()
        mine = rank_of(f)
        for inc in INCLUDE_RE.findall(text):
            if "/" not in inc:
                continue  # config.h, or a header beside the file
            r = rank_of(inc)
            if r is None:
                continue  # a folder outside the layers (a generated header)
            if r > mine or (r == mine and inc.split("/", 1)[0] != top):
                bad.append(f"{f} includes \"{inc}\": {top}/ (rank {mine}) may include only "
                           f"its own headers and those of the layers below it")
    return bad


def objects(build, src):
    """(unit, source folder, object path) of every object of the build's libraries whose source
    still exists (a build folder keeps the objects of deleted files)."""
    out = []
    for root, dirs, names in os.walk(build):
        dirs[:] = [d for d in dirs if d not in ("test-logs", "autom4te.cache")]
        if os.path.basename(root) != ".libs":
            continue
        folder = os.path.relpath(os.path.dirname(root), build)
        for n in names:
            m = re.match(r"(lib[A-Za-z0-9_]+?_la)-.*\.o$", n)
            if not m or folder.split("/", 1)[0] not in LIBRARY_DIRS:
                continue
            stem = os.path.join(src, source_name(n, folder))
            if any(os.path.exists(stem + ext) for ext in (".c", ".cu", ".hip", ".cpp", ".cc")):
                out.append((m.group(1), folder, os.path.join(root, n)))
    return out


def nm_symbols(path):
    res = subprocess.run(["nm", "-P", path], capture_output=True, text=True)
    defined, undefined = set(), set()
    for line in res.stdout.splitlines():
        parts = line.split()
        if len(parts) < 2:
            continue
        name, kind = parts[0], parts[1]
        if kind == "U":
            undefined.add(name)
        elif kind in "TDBRVWtdbr" and kind.isupper():
            defined.add(name)
    return defined, undefined


def source_name(obj, folder):
    base = os.path.basename(obj)
    base = re.sub(r"^lib[A-Za-z0-9_]+?_la-", "", base)[:-2]
    return f"{folder}/{base}"


def strongly_connected(nodes, edges):
    """Tarjan's algorithm, iterative: the components of more than one node."""
    index, low, on, stack, comps, counter = {}, {}, set(), [], [], [0]
    for start in nodes:
        if start in index:
            continue
        work = [(start, iter(sorted(edges.get(start, ()))))]
        index[start] = low[start] = counter[0]
        counter[0] += 1
        stack.append(start)
        on.add(start)
        while work:
            v, it = work[-1]
            nxt = next(it, None)
            if nxt is not None:
                if nxt not in index:
                    index[nxt] = low[nxt] = counter[0]
                    counter[0] += 1
                    stack.append(nxt)
                    on.add(nxt)
                    work.append((nxt, iter(sorted(edges.get(nxt, ())))))
                elif nxt in on:
                    low[v] = min(low[v], index[nxt])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    comps.append(sorted(comp))
    return comps


def check_calls(build, src):
    objs = objects(build, src)
    if not objs:
        return None, f"no library objects under {build} (build first)"
    bad = []
    units = {}
    for unit, folder, path in objs:
        units.setdefault(unit, []).append((folder, path))
    for unit, members in sorted(units.items()):
        syms = {}
        owner = {}
        for folder, path in members:
            name = source_name(path, folder)
            d, u = nm_symbols(path)
            syms[name] = (folder, u)
            for s in d:
                owner.setdefault(s, name)
        edges, why = {}, {}
        for name, (folder, undefined) in syms.items():
            for s in undefined:
                o = owner.get(s)
                if not o or o == name:
                    continue
                edges.setdefault(name, set()).add(o)
                why.setdefault((name, o), set()).add(s)
                ra, rb = rank_of(folder), rank_of(syms[o][0])
                if ra is not None and rb is not None and rb > ra:
                    bad.append(f"{unit}: {name} (rank {ra}) calls {s} of {o} (rank {rb}): a "
                               f"call that runs up the layers")
        for comp in strongly_connected(sorted(syms), edges):
            folders = {syms[n][0] for n in comp}
            if len(folders) < 2:
                continue  # a circle inside one folder is that folder's business
            ties = []
            for a in comp:
                for b in sorted(edges.get(a, ())):
                    if b in comp:
                        names = sorted(why[(a, b)])
                        more = f" and {len(names) - 3} more" if len(names) > 3 else ""
                        ties.append(f"    {a} -> {b}: {', '.join(names[:3])}{more}")
            bad.append(f"{unit}: a circle across folders ({', '.join(sorted(folders))}):\n"
                       + "\n".join(ties))
    return bad, None


def check_config(src, files):
    bad = []
    pat = re.compile(r'getenv\s*\(\s*"(MSCCLPP_[A-Z0-9_]*)"')
    for f in files:
        if f.split("/", 1)[0] not in LIBRARY_DIRS or not f.endswith(SOURCE_EXT):
            continue
        with open(os.path.join(src, f), encoding="utf-8", errors="replace") as fh:
            for i, line in enumerate(fh, 1):
                for var in pat.findall(line):
                    bad.append(f"{f}:{i} reads {var} with getenv(): declare it in "
                               f"base/config_vars.h and read it through the table")
    return bad


def header_match(name, pattern):
    """fnmatch for header names: * stays inside one path component, except that a pattern
    ending in "/*" takes everything below that folder (ucp/* is ucp/api/ucp.h too)."""
    if pattern.endswith("/*"):
        return name.startswith(pattern[:-1])
    rx = "".join("[^/]*" if c == "*" else re.escape(c) for c in pattern)
    return re.fullmatch(rx, name) is not None


def vendor_table(text):
    """docs/architecture.md's table "| where | vendor headers | why |": [(path, [pattern])]."""
    rows, inside = [], False
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")] if line.startswith("|") \
            else None
        if cells is None:
            inside = False
            continue
        if [c.lower() for c in cells[:2]] == ["where", "vendor headers"]:
            inside = True
            continue
        if not inside or set(cells[0]) <= set("-: "):
            continue
        where = re.findall(r"`([^`]+)`", cells[0])
        heads = re.findall(r"`([^`]+)`", cells[1]) if len(cells) > 1 else []
        for w in where:
            rows.append((w, heads))
    return rows


def check_vendor(src, files):
    path = os.path.join(src, "docs", "architecture.md")
    try:
        with open(path, encoding="utf-8") as fh:
            rows = vendor_table(fh.read())
    except OSError as e:
        return [f"docs/architecture.md: {e.strerror}"]
    if not rows:
        return ["docs/architecture.md: no table \"| where | vendor headers | why |\""]
    bad, used = [], set()
    for f in sorted(files):
        if not f.endswith(VENDOR_SCAN_EXT):
            continue
        with open(os.path.join(src, f), encoding="utf-8", errors="replace") as fh:
            text = fh.read()
        for inc in ANY_INCLUDE_RE.findall(text):
            if not any(header_match(inc, p) for p in VENDOR_HEADERS):
                continue
            if os.path.exists(os.path.join(os.path.dirname(os.path.join(src, f)), inc)):
                continue  # a header of ours beside the file (vendor/hipnv/hip/*.h include each other)
            ok = False
            for i, (where, heads) in enumerate(rows):
                here = f.startswith(where) if where.endswith("/") else f == where
                for h in heads:
                    if here and header_match(inc, h):
                        used.add((i, h))
                        ok = True
            if not ok:
                bad.append(f"{f} includes <{inc}>, a vendor's header: only the places of "
                           f"docs/architecture.md's table \"Vendor headers\" may, each with its "
                           f"reason (call the HAL, or add a row that says why)")
    for i, (where, heads) in enumerate(rows):
        for h in heads:
            if (i, h) not in used:
                bad.append(f"docs/architecture.md, Vendor headers: the row for {where} allows "
                           f"{h}, which no file there includes any more: drop it")
    return bad


def map_section(text, title):
    """The section of docs/architecture.md whose heading is "## N. <title>"."""
    m = re.search(rf"^## [0-9]+\. {title}\b.*?(?=^## |\Z)", text, re.M | re.S)
    return m.group(0) if m else ""


def check_map(src, files):
    path = os.path.join(src, "docs", "architecture.md")
    try:
        with open(path, encoding="utf-8") as fh:
            text = fh.read()
    except OSError as e:
        return [f"docs/architecture.md: {e.strerror}"]
    bad = []
    folders = {f.split("/", 1)[0] for f in files if "/" in f and not f.startswith(".")}
    layers = map_section(text, "Layers and folders")
    block = re.search(r"```\n(.*?)```", layers, re.S)
    named = set()
    if block:
        for line in block.group(1).splitlines():
            # the folder column: the words ending in "/" before the description
            for word in line.split():
                if word == "|":
                    continue
                m = re.match(r"([a-z][a-z0-9_-]*)/([a-z0-9_/-]*)$", word)
                if not m:
                    break
                named.add(m.group(1))
    else:
        bad.append("docs/architecture.md, Layers and folders: no folder diagram (a ``` block)")
    for f in sorted(folders - named):
        bad.append(f"docs/architecture.md, Layers and folders: the folder {f}/ is missing from the map")
    for f in sorted(named - folders):
        bad.append(f"docs/architecture.md, Layers and folders: the map names {f}/, which does not exist")
    # configure's summary: a line per transport folder, and no "not implemented" left over
    try:
        with open(os.path.join(src, "configure.ac"), encoding="utf-8") as fh:
            conf = fh.read()
    except OSError as e:
        conf = ""
        bad.append(f"configure.ac: {e.strerror}")
    summary = conf[conf.find("configured:"):]
    for t in sorted({f.split("/")[1] for f in files
                     if f.startswith("transports/") and f.count("/") >= 2}):
        if t != "ipc" and f"transport {t} " not in summary:
            bad.append(f"configure.ac: the summary has no line for transport {t} (transports/{t}/)")
    if "not implemented" in summary:
        bad.append("configure.ac: the summary says something is not implemented")
    tests = map_section(text, "Tests")
    test_dirs = {f.split("/")[1] for f in files if f.startswith("tests/") and f.count("/") >= 2}
    listed = set(re.findall(r"`tests/([a-z0-9_-]+)/`", tests))
    for d in sorted(test_dirs - listed):
        bad.append(f"docs/architecture.md, Tests: tests/{d}/ is missing from the test list")
    for d in sorted(listed - test_dirs):
        bad.append(f"docs/architecture.md, Tests: the test list names tests/{d}/, which does not "
                   f"exist")
    return bad


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--src", default=os.environ.get("MSCCLPP_TOP_SRCDIR",
                                                   os.path.dirname(here)))
    ap.add_argument("--build", default=os.environ.get("MSCCLPP_TOP_BUILDDIR"))
    ap.add_argument("--tap", action="store_true")
    ap.add_argument("checks", nargs="*", default=["layers", "calls", "config", "vendor", "map"])
    a = ap.parse_args()
    build = a.build or os.path.join(a.src, "build")
    files = tracked_files(a.src)
    if a.tap:
        print(f"1..{len(a.checks)}")
    failed = 0
    for n, name in enumerate(a.checks, 1):
        skip = None
        if name == "layers":
            bad = check_layers(a.src, files)
        elif name == "calls":
            bad, skip = check_calls(build, a.src)
        elif name == "config":
            bad = check_config(a.src, files)
        elif name == "vendor":
            bad = check_vendor(a.src, files)
        elif name == "map":
            bad = check_map(a.src, files)
        else:
            print(f"unknown check {name}", file=sys.stderr)
            return 2
        title = {"layers": "includes run down the layers (ARCHITECTURE.md §2)",
                 "calls": "no call runs up the layers and no circle crosses folders",
                 "config": "every MSCCLPP_* variable is read through base/config_vars.h",
                 "vendor": "vendor headers only where docs/architecture.md says why",
                 "map": "docs/architecture.md maps every folder, and only those"}[name]
        if skip:
            print(f"ok {n} - {title} # SKIP {skip}" if a.tap else f"{name}: skipped: {skip}")
            continue
        for b in bad:
            print(("# " if a.tap else "") + b.replace("\n", "\n# " if a.tap else "\n"))
        if bad:
            failed += 1
        if a.tap:
            print(f"{'not ok' if bad else 'ok'} {n} - {title}")
        elif not bad:
            print(f"{name}: ok")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
