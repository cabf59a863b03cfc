"""AlgoSpec: what ``mscclpp.compile`` needs to know about an algorithm."""

from dataclasses import dataclass, field, fields

from .internal.types import ReplicationPolicy


@dataclass(frozen=True)
class AlgoSpec:
    name: str
    collective: object
    nranks_per_node: int
    world_size: int
    in_place: bool = None
    instances: int = 1
    protocol: str = "Simple"
    instr_fusion: bool = True
    auto_sync: bool = True
    replication_policy: ReplicationPolicy = ReplicationPolicy.interleaved
    reuse_resources: bool = False
    num_threads_per_block: int = 1024
    use_double_scratch_buffer: bool = False
    buffer_alignment: int = 16
    min_message_size: int = 0
    max_message_size: int = 2**64 - 1
    tags: dict = field(default_factory=dict, hash=False)

    def canonical(self):
        """Every field as plain JSON data (the compile cache key uses all of them)."""
        out = {}
        for f in fields(self):
            v = getattr(self, f.name)
            if f.name == "collective":
                v = {"type": type(v).__name__, "name": getattr(v, "name", str(v)),
                     "num_ranks": getattr(v, "num_ranks", None),
                     "chunk_factor": getattr(v, "chunk_factor", None),
                     "inplace": getattr(v, "inplace", None),
                     "extra": getattr(v, "extra_plan_fields", dict)(),
                     "repr": repr(v)}
            elif f.name == "tags":
                v = {str(k): v[k] for k in sorted(v, key=str)}
            elif isinstance(v, ReplicationPolicy):
                v = v.value
            out[f.name] = v
        return out
