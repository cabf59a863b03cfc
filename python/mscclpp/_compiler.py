"""``mscclpp.compile``: run a DSL algorithm for an :class:`AlgoSpec` and cache the plan."""

import hashlib
import inspect
import json
import os
import tempfile
from dataclasses import dataclass

from ._paths import default_cache_dir  # noqa: F401 (also mscclpp.default_cache_dir)
from ._version import __version__


def _hasher():
    try:
        import blake3  # optional

        return blake3.blake3()
    except ImportError:
        return hashlib.sha256()


@dataclass(frozen=True)
class Constraint:
    world_size: int
    nranks_per_node: int


class CompiledAlgorithm:
    """A compiled DSL algorithm: the plan file plus the metadata used to select it."""

    def __init__(self, plan_id, plan_path, spec, rank, plan_json=None):
        self.id = plan_id
        self.plan_path = plan_path
        self.name = spec.name
        self.collective = spec.collective.name
        self.tags = dict(spec.tags)
        self.constraint = Constraint(spec.world_size, spec.nranks_per_node)
        self.rank = rank
        self.spec = spec
        self.message_range = (spec.min_message_size, spec.max_message_size)
        self.in_place = bool(spec.collective.inplace)
        self._json = plan_json

    @property
    def plan_json(self):
        if self._json is None:
            with open(self.plan_path) as f:
                self._json = f.read()
        return self._json

    @property
    def plan(self):
        return json.loads(self.plan_json)

    def check(self, **kwargs):
        from .simulator import verify_plan

        return verify_plan(self.plan_path, **kwargs)

    def execute(self, *args, **kwargs):
        """Run through the native bindings (imported on first use)."""
        from . import _binding

        mod = _binding.load()
        return mod.execute_plan(self, *args, **kwargs)

    def __repr__(self):
        return (f"CompiledAlgorithm(name={self.name!r}, collective={self.collective!r}, "
                f"constraint={self.constraint}, tags={self.tags}, plan_path={self.plan_path!r})")


def _source_digest(algo):
    try:
        src = inspect.getsource(algo)
    except (OSError, TypeError):
        code = getattr(algo, "__code__", None)
        src = repr(code.co_code) + repr(code.co_consts) if code else repr(algo)
    return hashlib.sha256(src.encode()).hexdigest()


def plan_id(algo, algo_spec, rank=None, single_rank=False, kwargs=None):
    """A digest of everything the plan depends on: package version, every AlgoSpec field, the
    algorithm's source, extra keyword arguments, and the rank when only its part is emitted."""
    key = {
        "version": __version__,
        "spec": algo_spec.canonical(),
        "source": _source_digest(algo),
        "kwargs": {k: repr(v) for k, v in sorted((kwargs or {}).items())},
        "rank": rank if single_rank else None,
    }
    h = _hasher()
    h.update(json.dumps(key, sort_keys=True, default=repr).encode())
    return h.hexdigest()[:32]


def compile(algo, algo_spec, rank=0, cache_dir=None, single_rank=False, force=False,
            **kwargs):  # noqa: A001 (MSCCL++ name)
    """Compile ``algo(algo_spec, **kwargs)`` (which returns a CollectiveProgram) into a plan
    file in the cache (``cache_dir`` or :func:`default_cache_dir`) and return a
    :class:`CompiledAlgorithm`. With ``single_rank=True`` only ``rank``'s part is written."""
    from .language.program import CollectiveProgram

    pid = plan_id(algo, algo_spec, rank, single_rank, kwargs)
    cache_dir = cache_dir or default_cache_dir()
    path = os.path.join(cache_dir, f"{pid}.json")
    if os.path.exists(path) and not force:
        return CompiledAlgorithm(pid, path, algo_spec, rank)
    program = algo(algo_spec, **kwargs)
    if not isinstance(program, CollectiveProgram):
        raise TypeError(f"{getattr(algo, '__name__', algo)} must return a CollectiveProgram, "
                        f"got {type(program).__name__}")
    if program.collective.inplace != bool(algo_spec.collective.inplace) or \
            (algo_spec.in_place is not None and bool(algo_spec.in_place) != program.collective.inplace):
        raise ValueError("the program's in-place setting differs from the AlgoSpec's")
    text = program.to_json(indent=None, rank=rank if single_rank else None,
                           separators=(",", ":"))
    os.makedirs(cache_dir, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=cache_dir, prefix=".tmp-", suffix=".json")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return CompiledAlgorithm(pid, path, algo_spec, rank, text)
