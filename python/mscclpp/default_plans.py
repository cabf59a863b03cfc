"""Default plans: the DSL programs in the repository's ``plans/`` directory and the JSON files
they generate (also shipped inside the package as ``mscclpp/_plans``)."""

import importlib.util
import json
import os
import sys


def programs_dir():
    """Where the default-plan programs live: ``$MSCCLPP_PLANS_DIR``, the source tree's
    ``plans/``, or the copy installed with the package."""
    env = os.environ.get("MSCCLPP_PLANS_DIR")
    if env:
        return env
    here = os.path.dirname(os.path.abspath(__file__))
    tree = os.path.normpath(os.path.join(here, "..", "..", "plans"))
    if os.path.exists(os.path.join(tree, "_common.py")):
        return tree
    return os.path.join(here, "_plans")


def _load(path):
    name = "_mscclpp_plan_" + os.path.splitext(os.path.basename(path))[0]
    d = os.path.dirname(path)
    added = d not in sys.path
    if added:
        sys.path.insert(0, d)
    try:
        spec = importlib.util.spec_from_file_location(name, path)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
    finally:
        if added:
            sys.path.remove(d)
    return mod


def generate(src_dir=None, suffix=".py", **extra):
    """Yield (file name, plan JSON text) for every default plan: of the programs whose file
    name ends with `suffix`, each called as default_plans(**extra) (tests/gpu/direct_ready.py:
    suffix "_direct.py", ready=True)."""
    src_dir = src_dir or programs_dir()
    names = sorted(f for f in os.listdir(src_dir) if f.endswith(suffix) and not f.startswith("_"))
    if not names:
        raise FileNotFoundError(f"no default-plan programs in {src_dir}")
    for f in names:
        mod = _load(os.path.join(src_dir, f))
        if not hasattr(mod, "default_plans"):
            continue
        for fname, program in mod.default_plans(**extra):
            yield fname, plan_text(program)


def plan_text(program):
    """Plan JSON laid out for review: one line per op, channel table or buffer entry."""
    return format_plan(program.to_dict())


def _c(v):
    return json.dumps(v, separators=(", ", ": "))


def format_plan(plan):
    out = ["{"]
    items = list(plan.items())
    for i, (k, v) in enumerate(items):
        comma = "," if i < len(items) - 1 else ""
        if k != "gpus":
            out.append(f"  {_c(k)}: {_c(v)}{comma}")
            continue
        out.append('  "gpus": [')
        for gi, g in enumerate(v):
            out.append("    {")
            gitems = list(g.items())
            for j, (gk, gv) in enumerate(gitems):
                gcomma = "," if j < len(gitems) - 1 else ""
                if gk != "threadblocks":
                    out.append(f"      {_c(gk)}: {_c(gv)}{gcomma}")
                    continue
                out.append('      "threadblocks": [')
                for ti, tb in enumerate(gv):
                    tcomma = "," if ti < len(gv) - 1 else ""
                    out.append(f'        {{"id": {tb["id"]}, "ops": [')
                    ops = tb["ops"]
                    for oi, op in enumerate(ops):
                        out.append(f"          {_c(op)}{',' if oi < len(ops) - 1 else ''}")
                    rest = {kk: vv for kk, vv in tb.items() if kk not in ("id", "ops")}
                    tail = "".join(f", {_c(kk)}: {_c(vv)}" for kk, vv in rest.items())
                    out.append(f"        ]{tail}}}{tcomma}")
                out.append(f"      ]{gcomma}")
            out.append("    }" + ("," if gi < len(v) - 1 else ""))
        out.append(f"  ]{comma}")
    out.append("}")
    return "\n".join(out) + "\n"


def write(out_dir, src_dir=None, check_only=False):
    """Write (or, with ``check_only``, compare) every default plan. Returns the list of files
    that differ (check) or were written."""
    os.makedirs(out_dir, exist_ok=True) if not check_only else None
    changed = []
    for fname, text in generate(src_dir):
        path = os.path.join(out_dir, fname)
        old = None
        if os.path.exists(path):
            with open(path) as fh:
                old = fh.read()
        if old != text:
            changed.append(fname)
            if not check_only:
                os.makedirs(os.path.dirname(path), exist_ok=True)
                with open(path, "w") as fh:
                    fh.write(text)
    return changed
