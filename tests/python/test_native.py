"""mscclpp.compile_native: compile (gcc, nvcc, hipcc), cache by content, load through the C
library, and the errors a user meets (compiler output, missing module symbols, another ABI);
the launch parameters of Executor.execute / Algorithm.execute reaching mscclpp_execute_launch
(tests/python/launch_ranks.py, forked ranks on the host backend)."""

import os
import shutil
import subprocess
import sys

import pytest

from conftest import ROOT
from mscclpp import runtime

pytestmark = pytest.mark.skipif(
    runtime.library_path() is None,
    reason="libmscclpp.so not built (run ./scripts/build.sh or set MSCCLPP_LIBRARY)")

NATIVE = os.path.join(ROOT, "examples", "native")


def test_compile_load_and_cache(tmp_path):
    import mscclpp

    src = os.path.join(NATIVE, "allreduce_native.c")
    m1 = mscclpp.compile_native("ar", src, cache_dir=str(tmp_path))
    assert not m1.cached and os.path.dirname(m1.path) == str(tmp_path / "native")
    assert [(a.name, a.collective) for a in m1.algorithms] == [("native_allreduce_c",
                                                                 "allreduce")]
    assert m1.algorithms[0].is_native_algorithm()
    # same content: the cached module, not a new build
    m2 = mscclpp.compile_native("ar", src, cache_dir=str(tmp_path))
    assert m2.cached and m2.path == m1.path
    # other content: another module
    changed = tmp_path / "changed.c"
    changed.write_text(open(src).read() + "\n/* changed */\n")
    m3 = mscclpp.compile_native("ar", str(changed), cache_dir=str(tmp_path))
    assert not m3.cached and m3.path != m1.path
    # MSCCL++'s capsule flow
    algo = mscclpp.Algorithm.create_from_native_capsule(m1.create_native_allreduce_c_algorithm())
    assert algo.name == "native_allreduce_c"
    with pytest.raises(KeyError, match="no algorithm 'nope'"):
        m1.create_nope_algorithm()
    for m in (m1, m2, m3):
        m.close()


def test_compile_error_reaches_python_and_last_error(tmp_path):
    import mscclpp

    bad = tmp_path / "bad.c"
    bad.write_text("#include <mscclpp/native.h>\nint broken( {\n")
    with pytest.raises(mscclpp.MscclppError) as e:
        mscclpp.compile_native("bad", str(bad), cache_dir=str(tmp_path))
    assert "gcc failed" in str(e.value) and "bad.c:2" in str(e.value) and "error" in str(e.value)
    last = runtime.load().mscclpp_last_error().decode()
    assert "compile_native('bad')" in last and "bad.c:2" in last
    assert not os.listdir(tmp_path / "native")   # no partial output left in the cache


def test_missing_symbol_and_abi_mismatch(tmp_path):
    import mscclpp

    nosym = tmp_path / "nosym.c"
    nosym.write_text("int not_a_module(void) { return 1; }\n")
    with pytest.raises(mscclpp.MscclppError, match="no symbol mscclpp_native_abi_version"):
        mscclpp.compile_native("nosym", str(nosym), cache_dir=str(tmp_path))
    src = os.path.join(ROOT, "tests", "native", "test_modules.c")
    with pytest.raises(mscclpp.MscclppError, match="built for native ABI version 99"):
        mscclpp.compile_native("badabi", src, cache_dir=str(tmp_path),
                               extra_flags=["-DVARIANT_BAD_ABI"])
    assert "version 99" in runtime.load().mscclpp_last_error().decode()


def test_wrong_extension(tmp_path):
    import mscclpp

    f = tmp_path / "algo.f90"
    f.write_text("")
    with pytest.raises(ValueError, match=r"expected a \.c \(gcc\), \.cu \(nvcc\)"):
        mscclpp.compile_native("x", str(f), cache_dir=str(tmp_path))


def _gpu_compile(tmp_path, tool, src, name, algo):
    import mscclpp
    from mscclpp import _native

    backend = "cuda" if src.endswith(".cu") else "hip"
    if not _native._compiler(backend, src):
        pytest.skip(f"{tool} is not installed")
    m = mscclpp.compile_native(name, os.path.join(NATIVE, src), cache_dir=str(tmp_path))
    assert [a.name for a in m.algorithms] == [algo]
    assert mscclpp.compile_native(name, os.path.join(NATIVE, src), cache_dir=str(tmp_path)).cached
    if runtime.load().mscclpp_backend_name().decode() != backend:
        pytest.skip(f"compiled and loaded with {tool}; running it needs a {backend} GPU (this "
                    f"run uses the {runtime.load().mscclpp_backend_name().decode()} backend)")


def test_cuda_module_compiles_and_loads(tmp_path):
    _gpu_compile(tmp_path, "nvcc", "allreduce_native_cuda.cu", "ar_cuda", "native_allreduce_cuda")


def test_hip_module_compiles_and_loads(tmp_path):
    _gpu_compile(tmp_path, "hipcc", "allreduce_native_hip.hip", "ar_hip", "native_allreduce_hip")


@pytest.mark.parametrize("nranks", [2, 3])
def test_launch_parameters_reach_the_library(nranks, tmp_path):
    pytest.importorskip("numpy", reason="the ranks use NumPy arrays on the host backend")
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"),
               MSCCLPP_CACHE_DIR=str(tmp_path), MSCCLPP_PLAN_DIR=os.path.join(ROOT, "plans"),
               MSCCLPP_TUNING_FILE="none")
    res = subprocess.run([sys.executable, os.path.join(ROOT, "tests", "python", "launch_ranks.py"),
                          "--nranks", str(nranks)], capture_output=True, text=True, env=env,
                         timeout=300)
    assert res.returncode == 0, res.stdout + res.stderr
    assert res.stdout.count("launch parameters reach the library") == nranks
