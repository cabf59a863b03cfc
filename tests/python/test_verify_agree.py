"""One verdict on every plan: the C loader + mscclpp_plan_verify() and `python3 -m mscclpp verify`
(issue 22 item 2). tests/fuzz/verify_agree.py does the work; here it runs bounded: the shared
corpus (tests/plans-bad and its verify/ cases, the fuzz seeds, the reference plans, the 2- and
4-rank default plans) and 300 mutants of a fixed seed. Run the script itself for longer fuzzing.
"""

import io
import os
import sys

import pytest

from mscclpp import runtime

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tests", "fuzz"))

import verify_agree  # noqa: E402

pytestmark = pytest.mark.skipif(runtime.library_path() is None,
                                reason="libmscclpp is not built (the C verdict needs it)")


def _run(files, mutants, seed):
    os.environ.setdefault("MSCCLPP_DEBUG", "NONE")
    out = io.StringIO()
    n, ok, bad, diff = verify_agree.run(runtime.library_path(), files, mutants, seed, out=out)
    return n, ok, bad, diff, out.getvalue()


def test_corpus_and_mutants_agree():
    files = verify_agree.expand(verify_agree.CORPUS + ["tests/plans-bad/verify/*.json"])
    n, ok, bad, diff, text = _run(files, 300, 20261126)
    assert not diff, text
    # the corpus is not trivial: both verdicts occur, and every malformed plan is refused
    assert ok >= 40 and bad >= 150, text


def test_verify_cases_refused_by_both():
    files = verify_agree.expand(["tests/plans-bad/verify/*.json"])
    c = verify_agree.CLib(runtime.library_path())
    for f in files:
        text = open(f, "rb").read()
        cv, cmsg = c.verdict(text)
        pv, pmsg = verify_agree.py_verdict(text)
        want = os.path.basename(f).startswith("ok_")
        assert cv == want and pv == want, (f, cmsg, pmsg)
