import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "python"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

# The library reads no build or source path of its own: the tests name the source tree's plans
# explicitly, as make check does (Makefile.am, AM_TESTS_ENVIRONMENT).
os.environ.setdefault("MSCCLPP_PLAN_DIR", os.path.join(ROOT, "plans"))


def bench_path():
    """The build's mscclpp-bench (next to MSCCLPP_LIBRARY's build, else ROOT/build)."""
    lib = os.environ.get("MSCCLPP_LIBRARY") or os.path.join(ROOT, "build", ".libs",
                                                            "libmscclpp.so")
    return os.path.join(os.path.dirname(os.path.dirname(lib)), "tools", "mscclpp-bench")


def gpu_check_host(only, out, **env_more):
    """scripts/gpu-check.sh --host --only ONLY -o OUT over that build: the steps' host dry run
    (a CompletedProcess). A loaded machine (the whole suite, other builds on two cores) once
    kept a rank from its bootstrap handshake past the 2 s default: the bench's start is not
    what these tests check."""
    build = os.path.dirname(os.path.dirname(bench_path()))
    env = dict(os.environ, MSCCLPP_TOP_BUILDDIR=build, GPU_CHECK_TIMEOUT="120",
               MSCCLPP_BOOTSTRAP_HANDSHAKE_TIMEOUT="30", **env_more)
    env.pop("MSCCLPP_HAL", None)
    env.pop("MSCCLPP_KERN_TRACE", None)
    return subprocess.run(["bash", os.path.join(ROOT, "scripts", "gpu-check.sh"), "--host",
                           "--only", only, "-o", str(out)], env=env, capture_output=True,
                          text=True, timeout=600)
