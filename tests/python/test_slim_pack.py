"""tests/gpu/slim-pack.sh: the GPU kit packed again without the programs no GPU step runs, and
its size held against the 64 MiB a device call carries (docs/gpu.md §7). No GPU needed: a built
tree is imitated here."""

import os
import subprocess
import tarfile

from conftest import ROOT

SLIM = os.path.join(ROOT, "tests", "gpu", "slim-pack.sh")


def touch(path, size=10):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(b"x" * size)


def test_keeps_what_the_steps_run(tmp_path):
    built = tmp_path / "gpu"
    keep = ["build/tools/mscclpp-bench", "build/tests/gpu/lat_probe",
            "build/tests/unit/test_exec_agree", "build/tests/unit/.libs/libfakehal.so",
            "build/tests/conformance/test_conformance", "build/.libs/libmscclpp.so",
            "tests/unit/test_buffers.c", "lib/libmpich.so.12"]
    drop = ["build/tests/unit/test_buffers", "build/tests/unit/test_kernels",
            "build/tests/fuzz/fuzz_boot", "build/tests/multinode/test_multinode",
            "build/tests/tune/test_tuning", "build/tests/nccl/test_nccl_percall",
            "build/executor/executor.o", "build/executor/executor.lo", ".git/HEAD"]
    for rel in keep + drop:
        touch(str(built / rel))
    pack = tmp_path / "kit.tgz"
    p = subprocess.run(["sh", SLIM, str(built), str(pack)], cwd=ROOT, capture_output=True,
                       text=True, timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "MiB of 64 MiB" in p.stdout, p.stdout
    with tarfile.open(pack) as t:
        names = set(t.getnames())
    for rel in keep:
        assert f"gpu/{rel}" in names, (rel, sorted(names))
    for rel in drop:
        assert f"gpu/{rel}" not in names, (rel, sorted(names))


def test_too_large_and_missing(tmp_path):
    p = subprocess.run(["sh", SLIM, str(tmp_path / "none"), str(tmp_path / "k.tgz")], cwd=ROOT,
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 1 and "none/build is missing" in p.stderr, p.stderr
    # 70 MiB that gzip cannot shrink, in a file a step needs: refused, as a call would be
    built = tmp_path / "gpu"
    os.makedirs(built / "build" / "tools")
    with open(built / "build" / "tools" / "mscclpp-bench", "wb") as f:
        f.write(os.urandom(70 << 20))
    p = subprocess.run(["sh", SLIM, str(built), str(tmp_path / "k.tgz")], cwd=ROOT,
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 1 and "too large for one call's carry" in p.stderr, p.stdout + p.stderr
