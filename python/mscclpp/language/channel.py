"""Channels between ranks: memory (peer-mapped memory), port (proxy-driven) and switch (NVLS).

Every ``MemoryChannel(dst, src)`` / ``PortChannel(dst, src)`` call creates a new channel; keep
the object to reuse it. The i-th channel from A to B (memory first, then port) is paired with
the i-th channel from B to A: a signal on one is consumed by a wait on the other.
"""

from .internal.types import (
    BufferType, ChannelType, DSLError, ReduceOperationType, SyncType,
)
from .internal.ops import Op
from .internal.active import get_program
from .thread_block_group import ThreadBlockGroup  # noqa: F401 (MSCCL++ exports it here)
from .rank import Chunk, _check_iter_context, _check_local, _check_sizes, _sync_arg, _tb_list


class _P2PChannel:
    ctype = None

    def __init__(self, dst_rank, src_rank):
        prog = get_program()
        self.dst_rank = dst_rank
        self.src_rank = src_rank
        self.channel_id = prog.add_channel(src_rank, dst_rank, self.ctype)
        self.channel_type = ChannelType(self.ctype)

    def __repr__(self):
        return f"{type(self).__name__}(dst_rank={self.dst_rank}, src_rank={self.src_rank}, " \
               f"id={self.channel_id})"

    # ---- helpers ------------------------------------------------------------------------------
    def _what(self, name):
        return f"{type(self).__name__}({self.dst_rank} <- {self.src_rank}).{name}"

    def _remote(self, chunk, what, scratch=False):
        if not isinstance(chunk, Chunk):
            raise DSLError(f"{what}: expected a chunk, got {chunk!r}")
        if chunk.rank != self.dst_rank:
            raise DSLError(f"{what}: the remote chunk belongs to rank {chunk.rank}, but the "
                           f"channel connects to rank {self.dst_rank}")
        if scratch and chunk.buffer != BufferType.scratch:
            raise DSLError(f"{what}: packets are written to a remote scratch buffer, not "
                           f"{chunk.buffer.name}")
        get_program().gpus[self.src_rank].add_remote_buffer(chunk.rank, chunk.buffer.value,
                                                            self.ctype)
        return chunk.remote_desc()

    def _sync_op(self, name, tb, data_sync, sync):
        prog = get_program()
        key = (self.ctype, self.channel_id)
        counts = prog.gpus[self.src_rank].sig if "signal" in name or name.startswith("pws") \
            else prog.gpus[self.src_rank].wait
        counts[key] = counts.get(key, 0) + 1
        prog.record(self.src_rank, tb, Op(name, self.ctype, [self.channel_id],
                                          sync=_sync_arg(data_sync, sync)))

    def _transfer(self, name, dst_chunk, src_chunk, tb, tb_group, iter_context,
                  src_scratch=False, dst_scratch=False, signals=False):
        what = self._what(name)
        _check_local(self.src_rank, src_chunk, what + " source")
        if src_scratch and src_chunk.buffer != BufferType.scratch:
            raise DSLError(f"{what}: packets are read from a local scratch buffer, not "
                           f"{src_chunk.buffer.name}")
        rdst = self._remote(dst_chunk, what + " destination", scratch=dst_scratch)
        _check_sizes(what, dst_chunk, src_chunk)
        _check_iter_context(iter_context)
        prog = get_program()
        for t, tbg in _tb_list(tb, tb_group, what):
            if signals:
                g = prog.gpus[self.src_rank]
                key = (self.ctype, self.channel_id)
                g.sig[key] = g.sig.get(key, 0) + 1
            prog.record(self.src_rank, t, Op(name, self.ctype, [self.channel_id],
                                             [src_chunk.local_desc()], [rdst], tbg))


class MemoryChannel(_P2PChannel):
    """A channel from ``src_rank`` to ``dst_rank`` over peer-mapped memory."""

    ctype = "memory"

    def signal(self, tb, data_sync=SyncType.both, relaxed=False, sync=None):
        self._sync_op("rlxsignal" if relaxed else "signal", tb, data_sync, sync)

    def wait(self, tb, data_sync=SyncType.both, relaxed=False, sync=None):
        self._sync_op("rlxwait" if relaxed else "wait", tb, data_sync, sync)

    def relaxedSignal(self, tb, data_sync=SyncType.both, sync=None):  # noqa: N802 (seed name)
        self.signal(tb, data_sync, relaxed=True, sync=sync)

    def relaxedWait(self, tb, data_sync=SyncType.both, sync=None):  # noqa: N802 (seed name)
        self.wait(tb, data_sync, relaxed=True, sync=sync)

    relaxed_signal = relaxedSignal
    relaxed_wait = relaxedWait

    def put(self, dst_chunk, src_chunk, tb=None, tb_group=None, iter_context=None):
        """Write local ``src_chunk`` into the peer's ``dst_chunk``."""
        self._transfer("put", dst_chunk, src_chunk, tb, tb_group, iter_context)

    def get(self, dst_chunk, src_chunk, tb=None, tb_group=None, iter_context=None):
        """Read the peer's ``src_chunk`` into local ``dst_chunk``."""
        what = self._what("get")
        _check_local(self.src_rank, dst_chunk, what + " destination")
        rsrc = self._remote(src_chunk, what + " source")
        _check_sizes(what, dst_chunk, src_chunk)
        _check_iter_context(iter_context)
        prog = get_program()
        for t, tbg in _tb_list(tb, tb_group, what):
            prog.record(self.src_rank, t, Op("get", "memory", [self.channel_id], [rsrc],
                                             [dst_chunk.local_desc()], tbg))

    def put_packets(self, dst_chunk, src_chunk, tb=None, tb_group=None, iter_context=None):
        """Write local plain data as packets into the peer's scratch (``ppkt``)."""
        self._transfer("ppkt", dst_chunk, src_chunk, tb, tb_group, iter_context,
                       dst_scratch=True)

    def read_put_packets(self, dst_chunk, src_chunk, tb=None, tb_group=None,
                         iter_context=None):
        """Forward packets from local scratch into the peer's scratch (``rppkt``)."""
        self._transfer("rppkt", dst_chunk, src_chunk, tb, tb_group, iter_context,
                       src_scratch=True, dst_scratch=True)

    def reduce(self, local_src_chunk, remote_src_chunks, tb=None, tb_group=None,
               local_dst_chunk=None, reduce_op=ReduceOperationType.sum, op=None,
               iter_context=None):
        """``local_dst = local_src (op) remote chunks of the peer`` (``rre``)."""
        what = self._what("reduce")
        if op is not None:
            reduce_op = op
        reduce_op = ReduceOperationType.coerce(reduce_op)
        if isinstance(remote_src_chunks, Chunk):
            remote_src_chunks = [remote_src_chunks]
        remote_src_chunks = list(remote_src_chunks)
        if not remote_src_chunks:
            raise DSLError(f"{what}: at least one remote chunk is required")
        if local_dst_chunk is None:
            local_dst_chunk = local_src_chunk
        _check_local(self.src_rank, local_src_chunk, what + " source")
        _check_local(self.src_rank, local_dst_chunk, what + " destination")
        rsrcs = [self._remote(c, what + " remote source") for c in remote_src_chunks]
        _check_sizes(what, local_src_chunk, local_dst_chunk, *remote_src_chunks)
        _check_iter_context(iter_context)
        prog = get_program()
        for t, tbg in _tb_list(tb, tb_group, what):
            prog.record(self.src_rank, t, Op("rre", "memory", [self.channel_id],
                                             [local_src_chunk.local_desc()] + rsrcs,
                                             [local_dst_chunk.local_desc()], tbg,
                                             reduce_op.value))


class PortChannel(_P2PChannel):
    """A channel from ``src_rank`` to ``dst_rank`` driven by a host proxy (network or IPC)."""

    ctype = "port"

    def signal(self, tb, data_sync=SyncType.both, sync=None, relaxed=False):
        self._sync_op("signal", tb, data_sync, sync)

    def wait(self, tb, data_sync=SyncType.both, sync=None, relaxed=False):
        self._sync_op("wait", tb, data_sync, sync)

    def flush(self, tb, data_sync=SyncType.both, sync=None):
        prog = get_program()
        prog.record(self.src_rank, tb, Op("flush", "port", [self.channel_id],
                                          sync=_sync_arg(data_sync, sync)))

    def put(self, dst_chunk, src_chunk, tb=None, tb_group=None, iter_context=None):
        self._transfer("put", dst_chunk, src_chunk, tb, tb_group, iter_context)

    def put_with_signal(self, dst_chunk, src_chunk, tb=None, tb_group=None,
                        iter_context=None):
        """Put, then signal the peer once the data has landed (``pws``)."""
        self._transfer("pws", dst_chunk, src_chunk, tb, tb_group, iter_context, signals=True)

    def put_with_signal_and_flush(self, dst_chunk, src_chunk, tb=None, tb_group=None,
                                  iter_context=None):
        self._transfer("pwsf", dst_chunk, src_chunk, tb, tb_group, iter_context, signals=True)

    def put_packets(self, dst_chunk, src_chunk, tb=None, tb_group=None, iter_context=None):
        """Relay packets already in local scratch to the peer's scratch (port ``ppkt``)."""
        self._transfer("ppkt", dst_chunk, src_chunk, tb, tb_group, iter_context,
                       src_scratch=True, dst_scratch=True)

    def read_put_packets(self, dst_chunk, src_chunk, tb=None, tb_group=None,
                         iter_context=None):
        self._transfer("rppkt", dst_chunk, src_chunk, tb, tb_group, iter_context,
                       src_scratch=True, dst_scratch=True)


class Channel:
    """``Channel(dst, src, channel_type)`` creates a memory or port channel."""

    memory = ChannelType.memory
    port = ChannelType.port
    switch = ChannelType.switch

    def __new__(cls, dst_rank, src_rank, channel_type=ChannelType.memory):
        if isinstance(channel_type, str):
            channel_type = ChannelType(channel_type)
        if channel_type == ChannelType.memory:
            return MemoryChannel(dst_rank, src_rank)
        if channel_type == ChannelType.port:
            return PortChannel(dst_rank, src_rank)
        raise DSLError("Channel(...) makes memory or port channels; use SwitchChannel for NVLS")


class SwitchChannel:
    """An NVLS multicast channel over ``rank_list``, bound to one buffer type on every member."""

    def __init__(self, rank_list, buffer_type=None, buffer=None):
        prog = get_program()
        if buffer_type is None:
            buffer_type = buffer
        if buffer_type is None:
            raise DSLError("SwitchChannel needs a buffer_type")
        buffer_type = BufferType.coerce(buffer_type)
        rank_list = list(rank_list)
        if len(rank_list) < 2:
            raise DSLError("a SwitchChannel needs at least two ranks")
        if len(set(rank_list)) != len(rank_list):
            raise DSLError(f"SwitchChannel: duplicate ranks in {rank_list}")
        for r in rank_list:
            prog.check_rank(r)
        self.rank_list = rank_list
        self.buffer_type = buffer_type
        self._ids = prog.add_switch_channel(rank_list, buffer_type.value)

    def at_rank(self, rank):
        if rank not in self._ids:
            raise DSLError(f"rank {rank} is not a member of the switch channel {self.rank_list}")
        return _SwitchChannelAtRank(self, rank)

    def _check_range(self, rank, buffer_offset, size, what):
        if not isinstance(buffer_offset, int) or not isinstance(size, int) \
                or buffer_offset < 0 or size <= 0:
            raise DSLError(f"{what}: bad buffer_offset/size {buffer_offset}/{size}")
        prog = get_program()
        for r in self.rank_list:
            g = prog.gpus[r]
            limit = {"i": g.input_chunks, "o": g.output_chunks}.get(self.buffer_type.value)
            if limit is not None and buffer_offset + size > limit:
                raise DSLError(f"{what}: chunk out of range: [{buffer_offset}:"
                               f"{buffer_offset + size}] of the {self.buffer_type.name} buffer "
                               f"of rank {r}, which has {limit} chunk(s)")

    def reduce(self, rank, buffer_offset, size, dst_chunk, tb, reduce_op=ReduceOperationType.sum,
               op=None, iter_context=None):
        """Load-reduce chunks [offset, offset+size) of every member's buffer into ``dst_chunk``
        of ``rank``; must be followed by a ``broadcast`` of that chunk (fused to ``glres``)."""
        what = f"SwitchChannel.at_rank({rank}).reduce"
        if op is not None:
            reduce_op = op
        reduce_op = ReduceOperationType.coerce(reduce_op)
        self._check_range(rank, buffer_offset, size, what)
        _check_local(rank, dst_chunk, what + " destination")
        if dst_chunk.size != size:
            raise DSLError(f"{what}: mismatched sizes: destination has {dst_chunk.size} "
                           f"chunk(s), the switch range {size}")
        _check_iter_context(iter_context)
        gid = self._ids[rank]
        get_program().record(rank, tb, Op("glre", "switch", [gid],
                                          [("S", gid, None, buffer_offset, size)],
                                          [dst_chunk.local_desc()],
                                          reduce_op=reduce_op.value))

    def _store(self, name, rank, src_chunk, buffer_offset, size, tb, iter_context):
        what = f"SwitchChannel.at_rank({rank}).{name}"
        self._check_range(rank, buffer_offset, size, what)
        _check_local(rank, src_chunk, what + " source")
        if src_chunk.size != size:
            raise DSLError(f"{what}: mismatched sizes: source has {src_chunk.size} chunk(s), "
                           f"the switch range {size}")
        if name == "broadcast_packets" and (src_chunk.buffer != BufferType.scratch
                                            or self.buffer_type != BufferType.scratch):
            raise DSLError(f"{what}: packets live in scratch buffers")
        _check_iter_context(iter_context)
        gid = self._ids[rank]
        get_program().record(rank, tb, Op("gstore" if name == "broadcast" else "gstorepkt",
                                          "switch", [gid], [src_chunk.local_desc()],
                                          [("S", gid, None, buffer_offset, size)]))

    def broadcast(self, rank, src_chunk, buffer_offset, size, tb, iter_context=None):
        """Store local ``src_chunk`` into chunks [offset, offset+size) of every member."""
        self._store("broadcast", rank, src_chunk, buffer_offset, size, tb, iter_context)

    def broadcast_packets(self, rank, src_chunk, buffer_offset, size, tb, iter_context=None):
        self._store("broadcast_packets", rank, src_chunk, buffer_offset, size, tb, iter_context)

    group_load_reduce = reduce
    group_store = broadcast


class _SwitchChannelAtRank:
    def __init__(self, channel, rank):
        self.channel = channel
        self.rank = rank

    def reduce(self, buffer_offset, size, dst_chunk, tb, reduce_op=ReduceOperationType.sum,
               op=None, iter_context=None):
        self.channel.reduce(self.rank, buffer_offset, size, dst_chunk, tb, reduce_op, op,
                            iter_context)

    def broadcast(self, src_chunk, buffer_offset, size, tb, iter_context=None):
        self.channel.broadcast(self.rank, src_chunk, buffer_offset, size, tb, iter_context)

    def broadcast_packets(self, src_chunk, buffer_offset, size, tb, iter_context=None):
        self.channel.broadcast_packets(self.rank, src_chunk, buffer_offset, size, tb,
                                       iter_context)

    group_load_reduce = reduce
    group_store = broadcast
