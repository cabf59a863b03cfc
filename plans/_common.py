"""Shared settings of the default plans (imported by the plan programs beside it)."""

import os
import sys

try:
    import mscclpp  # noqa: F401
except ImportError:  # running from a source tree without installing the package
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))

RANK_COUNTS = range(2, 9)          # one node, 2..8 ranks
PACKET_MAX_MESSAGE = 256 * 1024    # LL allreduce up to 256 KiB (inclusive) ...
SIMPLE_MIN_MESSAGE = PACKET_MAX_MESSAGE + 1  # ... Simple allreduce right above it
# The host backend (CPU ranks) moves LL packets far slower than plain copies: measured on 2
# cores, the Simple allreduce beats the LL one from 1-2 KiB (docs/performance.md). Its own
# variants live in plans/host/, which the executor registers before the generic plans.
HOST_PACKET_MAX_MESSAGE = 1024
MAX_MESSAGE = 2**64 - 1
INSTANCES = 4                      # thread blocks per rank for the Simple plans


def main(build, default_ranks=4):
    import argparse

    ap = argparse.ArgumentParser(description=build.__doc__)
    ap.add_argument("--num_ranks", type=int, default=default_ranks)
    args = ap.parse_args()
    print(build(args.num_ranks).to_json())
