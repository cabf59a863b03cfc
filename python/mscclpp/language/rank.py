"""Ranks, buffers, chunks and intra-rank semaphores."""

from .internal.types import BufferType, ChannelType, DSLError, ReduceOperationType, SyncType
from .internal.ops import Op
from .internal.active import get_program
from .thread_block_group import ThreadBlockGroup  # noqa: F401 (MSCCL++ exports it here)


def _tb_list(tb, tb_group, what):
    """[(tb, tbg)] for an op issued on one block or on a thread-block group."""
    if tb is not None and tb_group is not None:
        raise DSLError(f"{what}: give either tb or tb_group, not both")
    if tb_group is not None:
        n = tb_group.numtb()
        return [(t, (tb_group.get_internal_id(t), n) if n > 1 else None)
                for t in tb_group.tb_list]
    if tb is None:
        raise DSLError(f"{what}: a thread block (tb=...) or a tb_group is required")
    return [(tb, None)]


def _sync_arg(data_sync, sync, default=SyncType.both):
    if sync is not None:
        data_sync = sync
    if data_sync is None:
        data_sync = default
    return SyncType.coerce(data_sync).bits


def _check_iter_context(iter_context):
    if iter_context is None:
        return
    prog = get_program()
    if prog.loop_context is not iter_context:
        raise DSLError("iter_context must be the enclosing Loop.iteration context")


class Chunk:
    """``size`` consecutive chunks of a buffer of ``rank``, starting at ``index``."""

    __slots__ = ("rank", "buffer", "index", "size")

    def __init__(self, rank, buffer, index, size):
        self.rank = rank
        self.buffer = buffer
        self.index = index
        self.size = size

    def __repr__(self):
        return f"Chunk(rank={self.rank}, buffer={self.buffer.name}, index={self.index}, " \
               f"size={self.size})"

    def __eq__(self, other):
        return isinstance(other, Chunk) and (self.rank, self.buffer, self.index, self.size) == \
            (other.rank, other.buffer, other.index, other.size)

    def __hash__(self):
        return hash((self.rank, self.buffer, self.index, self.size))

    def local_desc(self):
        return ("L", self.buffer.value, None, self.index, self.size)

    def remote_desc(self):
        return ("R", self.rank, self.buffer.value, self.index, self.size)


class BaseBuffer:
    """A rank's input, output or scratch region; slicing gives a :class:`Chunk`."""

    def __init__(self, rank, buffer_type, offset, size):
        self.rank = rank
        self.buffer_type = buffer_type
        self.offset = offset
        self.size = size

    def __len__(self):
        return self.size

    def __getitem__(self, key):
        if isinstance(key, int) and not isinstance(key, bool):
            start, stop = key, key + 1
        elif isinstance(key, slice):
            if key.step not in (None, 1):
                raise DSLError(f"chunk slices must be contiguous (step 1), got step {key.step}")
            start = 0 if key.start is None else key.start
            stop = self.size if key.stop is None else key.stop
        else:
            raise DSLError(f"buffers are indexed by slices such as buf[a:b], got {key!r}")
        if not isinstance(start, int) or not isinstance(stop, int):
            raise DSLError(f"chunk slice bounds must be integers, got {key!r}")
        if start < 0 or stop > self.size or start >= stop:
            raise DSLError(
                f"chunk out of range: [{start}:{stop}] of the {self.buffer_type.name} buffer of "
                f"rank {self.rank}, which has {self.size} chunk(s)")
        return Chunk(self.rank, self.buffer_type, self.offset + start, stop - start)

    def __repr__(self):
        return f"{type(self).__name__}(rank={self.rank}, {self.buffer_type.name}, " \
               f"offset={self.offset}, size={self.size})"


class Buffer(BaseBuffer):
    """``size`` chunks of scratch allocated on ``rank`` (after earlier allocations)."""

    input = BufferType.input
    output = BufferType.output
    scratch = BufferType.scratch

    def __init__(self, rank, size):
        prog = get_program()
        prog.check_rank(rank)
        if not isinstance(size, int) or size <= 0:
            raise DSLError(f"scratch buffer size must be a positive number of chunks, got "
                           f"{size!r}")
        g = prog.gpus[rank]
        super().__init__(rank, BufferType.scratch, g.scratch_chunks, size)
        g.scratch_chunks += size
        prog._processed = None


class Semaphore:
    """A counting semaphore between the thread blocks of one rank (plan-format §2.3)."""

    def __init__(self, rank, initial_value=0, size=None):
        prog = get_program()
        prog.check_rank(rank)
        if size is not None:
            initial_value = size
        if not isinstance(initial_value, int) or initial_value < 0:
            raise DSLError(f"semaphore initial value must be a non-negative integer, got "
                           f"{initial_value!r}")
        self.rank = rank
        self.initial_value = initial_value
        g = prog.gpus[rank]
        self.id = len(g.sems)
        g.sems.append(initial_value)

    def acquire(self, tb, data_sync=SyncType.both, sync=None):
        get_program().record(self.rank, tb, Op("sem_acquire", sems=[self.id],
                                               sync=_sync_arg(data_sync, sync)))

    def release(self, tb, data_sync=SyncType.both, sync=None):
        get_program().record(self.rank, tb, Op("sem_release", sems=[self.id],
                                               sync=_sync_arg(data_sync, sync)))


def _check_local(rank, chunk, what):
    if not isinstance(chunk, Chunk):
        raise DSLError(f"{what}: expected a chunk (a slice of a buffer), got {chunk!r}")
    if chunk.rank != rank:
        raise DSLError(f"{what}: the chunk belongs to rank {chunk.rank}, not to rank {rank}")


def _check_sizes(what, *chunks):
    sizes = {c.size for c in chunks}
    if len(sizes) != 1:
        raise DSLError(f"{what}: mismatched sizes " + ", ".join(
            f"{c.buffer.name}[{c.index}:{c.index + c.size}]" for c in chunks))


class Rank:
    """Operations local to one rank."""

    Semaphore = Semaphore

    def __init__(self, rank):
        get_program().check_rank(rank)
        self.rank = rank

    def __repr__(self):
        return f"Rank({self.rank})"

    def get_input_buffer(self):
        g = get_program().gpus[self.rank]
        return BaseBuffer(self.rank, BufferType.input, 0, g.input_chunks)

    def get_output_buffer(self):
        g = get_program().gpus[self.rank]
        return BaseBuffer(self.rank, BufferType.output, 0, g.output_chunks)

    def _data_op(self, name, dst, src, tb, tb_group, iter_context, dst_scratch=False,
                 src_scratch=False):
        what = f"Rank({self.rank}).{name}"
        _check_local(self.rank, dst, what + " destination")
        _check_local(self.rank, src, what + " source")
        _check_sizes(what, dst, src)
        if dst_scratch and dst.buffer != BufferType.scratch:
            raise DSLError(f"{what}: packets are written to a scratch buffer, not "
                           f"{dst.buffer.name}")
        if src_scratch and src.buffer != BufferType.scratch:
            raise DSLError(f"{what}: packets are read from a scratch buffer, not "
                           f"{src.buffer.name}")
        _check_iter_context(iter_context)
        op_name = {"copy": "copy", "copy_packets": "cpkt", "unpack_packets": "upkt"}[name]
        prog = get_program()
        for t, tbg in _tb_list(tb, tb_group, what):
            prog.record(self.rank, t, Op(op_name, src=[src.local_desc()],
                                         dst=[dst.local_desc()], tbg=tbg))

    def copy(self, dst_chunk, src_chunk, tb=None, tb_group=None, iter_context=None):
        self._data_op("copy", dst_chunk, src_chunk, tb, tb_group, iter_context)

    def copy_packets(self, dst_chunk, src_chunk, tb=None, tb_group=None, iter_context=None):
        """Copy plain data into packet form (``cpkt``); the destination is scratch."""
        self._data_op("copy_packets", dst_chunk, src_chunk, tb, tb_group, iter_context,
                      dst_scratch=True)

    def unpack_packets(self, dst_chunk, src_chunk, tb=None, tb_group=None, iter_context=None):
        """Wait for packets in scratch and store their payload as plain data (``upkt``)."""
        self._data_op("unpack_packets", dst_chunk, src_chunk, tb, tb_group, iter_context,
                      src_scratch=True)

    def reduce(self, src_chunk, other_chunks, tb=None, tb_group=None, dst_chunk=None,
               reduce_op=ReduceOperationType.sum, packet=False, op=None, iter_context=None):
        """``dst = src (op) others...`` on this rank; with ``packet=True`` the other chunks are
        packets in scratch (``repkt``)."""
        what = f"Rank({self.rank}).reduce"
        if op is not None:
            reduce_op = op
        reduce_op = ReduceOperationType.coerce(reduce_op)
        if isinstance(other_chunks, Chunk):
            other_chunks = [other_chunks]
        other_chunks = list(other_chunks)
        if not other_chunks:
            raise DSLError(f"{what}: at least one other chunk is required")
        if dst_chunk is None:
            dst_chunk = src_chunk
        _check_local(self.rank, src_chunk, what + " source")
        _check_local(self.rank, dst_chunk, what + " destination")
        for c in other_chunks:
            _check_local(self.rank, c, what + " operand")
            if packet and c.buffer != BufferType.scratch:
                raise DSLError(f"{what}: packet operands are read from scratch, not "
                               f"{c.buffer.name}")
        _check_sizes(what, src_chunk, dst_chunk, *other_chunks)
        limit = get_program().limits["descs_per_op"]
        if len(other_chunks) + 1 > limit:
            raise DSLError(f"{what}: at most {limit - 1} other chunks per reduce (target "
                           f"{get_program().target})")
        _check_iter_context(iter_context)
        prog = get_program()
        src = [src_chunk.local_desc()] + [c.local_desc() for c in other_chunks]
        for t, tbg in _tb_list(tb, tb_group, what):
            prog.record(self.rank, t, Op("repkt" if packet else "re", src=list(src),
                                         dst=[dst_chunk.local_desc()], tbg=tbg,
                                         reduce_op=reduce_op.value))

    def barrier(self, tb_list):
        """Synchronise thread blocks of this rank: one block gets a ``nop``, several a device
        barrier."""
        tb_list = list(tb_list)
        if not tb_list:
            raise DSLError("Rank.barrier needs at least one thread block")
        if len(set(tb_list)) != len(tb_list):
            raise DSLError(f"Rank.barrier: duplicate thread blocks in {tb_list}")
        prog = get_program()
        if len(tb_list) == 1:
            prog.record(self.rank, tb_list[0], Op("nop"))
            return
        key = sorted(tb_list)
        bid = prog.barrier_id(self.rank, key)
        for t in tb_list:
            prog.record(self.rank, t, Op("barrier", barrier_id=bid, nblocks=len(tb_list)))
