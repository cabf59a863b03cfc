"""python3 -m mscclpp: install default plans, compile DSL programs, verify and show plans."""

import argparse
import contextlib
import io
import json
import os
import runpy
import sys
import time


def _install(args):
    from ._paths import default_cache_dir
    from . import default_plans

    out = args.cache_dir or os.path.join(default_cache_dir(), "default")
    written = default_plans.write(out)
    total = sum(1 for _, _, files in os.walk(out) for f in files if f.endswith(".json"))
    print(f"installed default plans into {out} ({len(written)} written, {total} present)")
    return 0


def _gen_default_plans(args):
    from . import default_plans

    out = args.out_dir or default_plans.programs_dir()
    changed = default_plans.write(out, args.programs_dir, check_only=args.check)
    if args.check:
        if changed:
            print("default plans differ from their programs: " + ", ".join(changed))
            return 1
        print("default plans are up to date")
        return 0
    print(f"{len(changed)} plan(s) written to {out}")
    return 0


def _compile(args):
    from .language import program as program_mod

    path = args.program
    if not os.path.isfile(path):
        why = "is a directory, not a program" if os.path.isdir(path) else "no such file"
        print(f"python3 -m mscclpp compile: {path}: {why}", file=sys.stderr)
        return 1
    captured = io.StringIO()
    last = {}
    orig_exit = program_mod.CollectiveProgram.__exit__

    def tracking_exit(self, *exc):
        last["program"] = self
        return orig_exit(self, *exc)

    program_mod.CollectiveProgram.__exit__ = tracking_exit
    old_target = program_mod.default_target
    program_mod.default_target = args.target
    old_argv = sys.argv
    sys.argv = [path] + list(args.args)
    sys.path.insert(0, os.path.dirname(os.path.abspath(path)))
    t0 = time.perf_counter()
    try:
        with contextlib.redirect_stdout(captured):
            runpy.run_path(path, run_name="__main__")
    finally:
        sys.argv = old_argv
        sys.path.pop(0)
        program_mod.CollectiveProgram.__exit__ = orig_exit
        program_mod.default_target = old_target
    prog = last.get("program")
    if prog is not None:
        plan = prog.to_dict(rank=args.rank)
        text = json.dumps(plan, indent=args.indent) + "\n"
    else:
        text = captured.getvalue()
        try:
            plan = json.loads(text)
        except ValueError as e:
            what = "printed nothing" if not text.strip() else f"printed text that is not a " \
                f"plan (JSON syntax error at line {getattr(e, 'lineno', '?')}: " \
                f"{getattr(e, 'msg', e)})"
            print(f"python3 -m mscclpp compile: {path} neither built a CollectiveProgram nor "
                  f"printed a plan: it {what}", file=sys.stderr)
            return 1
    out = args.output or os.path.splitext(os.path.basename(path))[0] + ".json"
    if out == "-":
        sys.stdout.write(text)
    else:
        with open(out, "w") as f:
            f.write(text)
        print(f"wrote {out} ({len(plan['gpus'])} ranks, {time.perf_counter() - t0:.2f} s)",
              file=sys.stderr)
    if args.verify:
        from .simulator import simulate

        res = simulate(plan)
        print(res, file=sys.stderr)
        return 0 if res else 1
    return 0


def _verify(args):
    from .simulator import verify_plan

    status = 0
    for path in args.plans:
        # --strict needs the race check (that is where relaxed ordering shows)
        races = None if args.races == "auto" else args.races == "on"
        if args.strict and args.races == "auto":
            races = True
        res = verify_plan(path, race_check=races,
                          pipeline_iterations=args.pipeline_iterations,
                          strict_relaxed=args.strict)
        print(f"{path}: {res}")
        if not res:
            status = 1
    return status


def _show(args):
    from .plan_view import parse_ranks, show

    try:
        ranks = parse_ranks(args.ranks) if args.ranks else None
        tl = show(args.plan, svg=args.svg, trace=args.trace, ranks=ranks)
    except (OSError, ValueError) as e:
        print(f"{args.plan}: {e}", file=sys.stderr)
        return 1
    print(tl.summary())
    for path in (args.svg, args.trace):
        if path:
            print(f"wrote {path}", file=sys.stderr)
    return 0


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] == "--install":
        argv[0] = "install"
    ap = argparse.ArgumentParser(prog="python3 -m mscclpp", description=__doc__)
    from ._version import __version__

    ap.add_argument("--version", action="version",
                    version=f"python3 -m mscclpp {__version__} (the mscclpp Python package)")
    sub = ap.add_subparsers(dest="cmd")
    p = sub.add_parser("install", help="write the default plans into the cache directory "
                       "($MSCCLPP_CACHE_DIR/default, default ~/.cache/mscclpp/default)")
    p.add_argument("--cache-dir", help="directory to write the plans into")
    p = sub.add_parser("gen-default-plans", help="regenerate plans/*.json from plans/*.py")
    p.add_argument("--out-dir")
    p.add_argument("--programs-dir")
    p.add_argument("--check", action="store_true", help="only compare; exit 1 on a difference")
    p = sub.add_parser("compile", help="run a DSL program and write its plan")
    p.add_argument("program")
    p.add_argument("-o", "--output", help="plan file (default: PROGRAM's name .json; - for "
                   "stdout)")
    p.add_argument("--rank", type=int, help="write only this rank's part (rank_subset)")
    p.add_argument("--indent", type=int, default=None)
    p.add_argument("--verify", action="store_true", help="also simulate the plan")
    p.add_argument("--target", choices=["native", "mscclpp"], default="native",
                   help="executor whose limits the plan must fit: this library's (native, "
                   "default) or MSCCL++'s (64 ops per block, 10 descriptors per op, no unfused "
                   "switch reduce)")
    p.epilog = "arguments for the program follow '--' (unknown options are passed on too)"
    p = sub.add_parser("verify", help="simulate plans and check their collective")
    p.add_argument("plans", nargs="+")
    p.add_argument("--races", choices=["auto", "on", "off"], default="auto")
    p.add_argument("--pipeline-iterations", type=int, default=2)
    p.add_argument("--strict", action="store_true",
                   help="refuse data ordered only by relaxed signals (rlxsignal), which do not "
                   "order memory in the GPU memory model (default: a warning)")
    p = sub.add_parser("show", help="summarize a plan; --svg FILE draws it as a timeline "
                       "(ranks x thread blocks, operations as boxes, signal->wait and packet "
                       "arrows), --trace FILE writes it for Perfetto / chrome://tracing")
    p.add_argument("plan")
    p.add_argument("--svg", metavar="FILE", help="write the timeline picture to FILE")
    p.add_argument("--trace", metavar="FILE", help="write a Chrome-trace / Perfetto JSON file "
                   "(a process per rank, a thread per thread block, flows for dependencies)")
    p.add_argument("--ranks", metavar="LIST", help="draw only these ranks (e.g. 0,2-3) and the "
                   "arrows between them")
    prog_args = []
    if "--" in argv:
        i = argv.index("--")
        argv, prog_args = argv[:i], argv[i + 1:]
    args, unknown = ap.parse_known_args(argv)
    if unknown:
        if args.cmd != "compile":
            ap.error("unrecognized arguments: " + " ".join(unknown))
    if args.cmd == "compile":
        args.args = unknown + prog_args
    if args.cmd == "install":
        return _install(args)
    if args.cmd == "gen-default-plans":
        return _gen_default_plans(args)
    if args.cmd == "compile":
        return _compile(args)
    if args.cmd == "verify":
        return _verify(args)
    if args.cmd == "show":
        return _show(args)
    ap.print_help()
    return 2


if __name__ == "__main__":
    sys.exit(main())
