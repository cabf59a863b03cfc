"""The MSCCL++-style multi-node programs beside this file and the plans they print.

Each program is a script in the style of MSCCL++'s DSL examples (`from mscclpp.language.<module>
import *`, `print(JSON())`), run here exactly as a user of MSCCL++ runs one: as a separate
process whose standard output is the plan. The plans are committed as <program>_<K>x<L>.json
(K nodes of L ranks); tests/python/test_multinode_programs.py checks they are up to date and
correct (simulator), and tests/conformance/test_conformance_multinode.sh runs them unchanged
across network namespaces with every element checked.

    python3 tests/multinode/programs/build.py           # rewrite the JSON files
    python3 tests/multinode/programs/build.py --check   # exit 1 if one is stale
"""

import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
PROGRAMS = ["allgather_ring", "allgather_pkt", "reducescatter", "send_recv"]
LAYOUTS = [(2, 1), (2, 2), (4, 2)]  # (nodes, ranks per node)


def plans():
    """Yield (file name, plan text) for every program and layout."""
    env = dict(os.environ)
    py = os.path.join(HERE, "..", "..", "..", "python")
    env["PYTHONPATH"] = os.path.normpath(py) + os.pathsep + env.get("PYTHONPATH", "")
    for prog in PROGRAMS:
        for k, l in LAYOUTS:
            res = subprocess.run(
                [sys.executable, os.path.join(HERE, prog + ".py"), "--name",
                 f"{prog}_{k}x{l}", "--nodes", str(k), "--gpus_per_node", str(l)],
                capture_output=True, text=True, env=env, check=True)
            yield f"{prog}_{k}x{l}.json", res.stdout


def main():
    check = "--check" in sys.argv[1:]
    stale = []
    for name, text in plans():
        path = os.path.join(HERE, name)
        old = open(path).read() if os.path.exists(path) else None
        if old != text:
            stale.append(name)
            if not check:
                with open(path, "w") as f:
                    f.write(text)
    if stale:
        print(("stale: " if check else "written: ") + ", ".join(stale))
    return 1 if check and stale else 0


if __name__ == "__main__":
    sys.exit(main())
