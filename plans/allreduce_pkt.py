"""Allreduce with LL packets for small messages (out-of-place, memory channels, one node).

Rank r, peers p != r, input/output cut into N chunks, scratch = 2N chunk slots:
  1. block k (one per peer p): put input chunk p as packets into p's scratch slot r;
  2. block 0: reduce input chunk r with the N-1 packet chunks in scratch[0:N] into output
     chunk r, and send the result as packets to every peer's scratch slot N + r (one respkt);
  3. block k: unpack scratch slot N + p (the reduced chunk p, from p) into output chunk p.
Packets carry their own flags, so no signal is needed; the double scratch buffer keeps the
next launch's packets away from packets a slow peer may still be reading. Only peers' scratch
is addressed remotely.
"""

from _common import (ALLPAIRS_MAX_MESSAGE, HOST_PACKET_MAX_MESSAGE, PACKET_MAX_MESSAGE,
                     RANK_COUNTS, main, memory_channels, peers_of)
from mscclpp.language import (
    AllReduce, Buffer, CollectiveProgram, Rank,
)


def allreduce_pkt(num_ranks, max_message_size=PACKET_MAX_MESSAGE, variant="", instances=1,
                  min_message_size=0, inplace=False):
    """Allreduce, LL packets."""
    N = num_ranks
    name = f"default_allreduce_pkt{'_ip' if inplace else ''}{variant}_{N}"
    with CollectiveProgram(name, AllReduce(N, 1, inplace), N,
                           instances=instances, protocol="LL", use_double_scratch_buffer=True,
                           min_message_size=min_message_size,
                           max_message_size=max_message_size) as prog:
        scratch = [Buffer(r, 2 * N) for r in range(N)]
        chan = memory_channels(N)
        for r in range(N):
            rank = Rank(r)
            inp, out = rank.get_input_buffer(), rank.get_output_buffer()
            peers = peers_of(r, N)
            for k, p in enumerate(peers):
                chan[(r, p)].put_packets(scratch[p][r:r + 1], inp[p:p + 1], tb=k)
            rank.reduce(inp[r:r + 1], [scratch[r][p:p + 1] for p in peers], tb=0,
                        dst_chunk=out[r:r + 1], packet=True)
            for p in peers:
                chan[(r, p)].put_packets(scratch[p][N + r:N + r + 1], out[r:r + 1], tb=0)
            for k, p in enumerate(peers):
                rank.unpack_packets(out[p:p + 1], scratch[r][N + p:N + p + 1], tb=k)
    return prog


def default_plans():
    # each plan also as an in-place twin (_ip): input == output is safe as written (rank r puts
    # input chunk p before its reduce and unpacks into output chunk p after it, in the same block;
    # the reduce writes output chunk r element by element from input chunk r)
    for ip in ("", "_ip"):
        for n in RANK_COUNTS:  # above the one-hop all-pairs plan (allreduce_allpairs.py)
            yield (f"allreduce_pkt{ip}_{n}.json",
                   allreduce_pkt(n, min_message_size=ALLPAIRS_MAX_MESSAGE + 1, inplace=bool(ip)))
        for n in RANK_COUNTS:  # host backend: LL only for the smallest messages
            yield (f"host/allreduce_pkt{ip}_{n}.json",
                   allreduce_pkt(n, HOST_PACKET_MAX_MESSAGE, "_host", inplace=bool(ip)))


if __name__ == "__main__":
    main(allreduce_pkt)
