"""``mscclpp.ext.AlgorithmCollectionBuilder`` (MSCCL++'s name and methods) over libmscclpp.

The builder is one per process. DSL algorithms added to it and the selectors set on it serve two
users:

- the Python runtime: ``build()`` returns the algorithms (``{collective: {name: algorithm}}``)
  with the selectors, to call ``execute`` on;
- the NCCL-API library (``libmscclpp_nccl.so``, preloaded or linked, so PyTorch's
  ``backend="nccl"`` calls it): each DSL plan is handed to it with ``mscclpp_nccl_add_plan``
  and the selectors are called by it for every collective, through the exported hook of
  ``include/mscclpp/nccl_ext.h`` found with ctypes in the already-loaded library. The order of
  selection is seed 000's: the selector's DSL plan (or, without a selector, the first added plan
  that serves the call), then the library's own algorithms, then the real NCCL
  (``MSCCLPP_NCCL_LIB_PATH``).

A selector is ``selector(algorithms, request)``: ``algorithms`` is ``{collective: {name:
algorithm}}`` (the added DSL algorithms and the default ones), ``request`` a
:class:`CollectiveRequest`; it returns an algorithm of ``algorithms`` or None. When the selector
returns None the fallback selector is asked; when both do, the library's own algorithms run,
then the real NCCL.
"""

import atexit
import ctypes
import os
import sys
import traceback

__all__ = ["AlgorithmCollection", "AlgorithmCollectionBuilder", "CollectiveRequest",
           "nccl_library"]

# include/mscclpp/nccl_ext.h
SELECT_DEFAULT, SELECT_NATIVE, SELECT_FALLBACK = -1, -2, -3
_SELECT_ERROR = -100   # not a valid answer: the NCCL call fails and says so
_EXT_VERSION = 1


class _Request(ctypes.Structure):
    _fields_ = [("collective", ctypes.c_char_p), ("message_size", ctypes.c_uint64),
                ("world_size", ctypes.c_int), ("n_ranks_per_node", ctypes.c_int),
                ("rank", ctypes.c_int), ("input_buffer", ctypes.c_void_p),
                ("output_buffer", ctypes.c_void_p), ("stream", ctypes.c_void_p),
                ("dtype", ctypes.c_int), ("root", ctypes.c_int)]


_SELECTOR_FN = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(_Request), ctypes.c_void_p)


class CollectiveRequest:
    """One collective call as a selector sees it (MSCCL++'s ``CollectiveRequest``):
    ``collective``, ``message_size`` (the NCCL count times the element size), ``world_size``,
    ``n_ranks_per_node``, ``rank``, ``input_buffer`` and ``output_buffer`` (addresses),
    ``stream`` (the native stream handle, 0 for none), ``dtype`` (a ``mscclpp.DataType``, or
    None) and ``hints`` (``{"root": [root]}`` for broadcast and reduce)."""

    def __init__(self, collective, message_size, world_size, n_ranks_per_node, rank,
                 input_buffer, output_buffer, stream=0, dtype=None, hints=None):
        self.collective = collective
        self.message_size = message_size
        self.world_size = world_size
        self.n_ranks_per_node = n_ranks_per_node
        self.rank = rank
        self.input_buffer = input_buffer
        self.output_buffer = output_buffer
        self.stream = stream
        self.dtype = dtype
        self.hints = dict(hints or {})

    def buffer_mode(self):
        """"in_place" or "out_of_place", as NCCL defines in place for the collective."""
        ib, ob, n, r = self.input_buffer, self.output_buffer, self.world_size, self.rank
        if self.collective == "allgather":
            inplace = ib == ob + r * self.message_size
        elif self.collective == "reducescatter":
            inplace = ob == ib + r * self.message_size
        else:
            inplace = ib == ob
        return "in_place" if inplace else "out_of_place"

    def __repr__(self):
        return (f"CollectiveRequest(collective={self.collective!r}, "
                f"message_size={self.message_size}, world_size={self.world_size}, "
                f"rank={self.rank}, dtype={self.dtype!r}, hints={self.hints})")


_nccl = None


def nccl_library():
    """The NCCL-API library of this process (a ctypes handle whose ``mscclpp_nccl_*`` functions
    are typed), or None when none is loaded: ``$MSCCLPP_NCCL_LIBRARY`` (a path, loaded
    RTLD_GLOBAL if it is not loaded yet), else the process's global symbols (the library
    preloaded with LD_PRELOAD, linked, or loaded RTLD_GLOBAL)."""
    global _nccl
    if _nccl:
        return _nccl
    path = os.environ.get("MSCCLPP_NCCL_LIBRARY")
    try:
        lib = ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL) if path else ctypes.CDLL(None)
    except OSError:
        return None
    if not hasattr(lib, "mscclpp_nccl_add_plan"):
        return None
    lib.mscclpp_nccl_ext_version.restype = ctypes.c_int
    lib.mscclpp_nccl_ext_version.argtypes = []
    version = lib.mscclpp_nccl_ext_version()
    if version != _EXT_VERSION:
        raise RuntimeError(f"mscclpp.ext: the NCCL-API library's hook is version {version}, "
                           f"this package speaks {_EXT_VERSION}")
    lib.mscclpp_nccl_add_plan.restype = ctypes.c_int
    lib.mscclpp_nccl_add_plan.argtypes = [ctypes.c_char_p, ctypes.c_size_t,
                                          ctypes.POINTER(ctypes.c_int)]
    lib.mscclpp_nccl_set_selector.restype = ctypes.c_int
    lib.mscclpp_nccl_set_selector.argtypes = [_SELECTOR_FN, ctypes.c_void_p]
    lib.mscclpp_nccl_ext_reset.restype = ctypes.c_int
    lib.mscclpp_nccl_ext_reset.argtypes = []
    lib.mscclpp_nccl_plan_calls.restype = ctypes.c_int
    lib.mscclpp_nccl_plan_calls.argtypes = [ctypes.c_int, ctypes.POINTER(ctypes.c_uint64)]
    _nccl = lib
    return lib


class AlgorithmCollection:
    """What ``build()`` returns: ``algorithms`` (``{collective: {name: algorithm}}``),
    ``get_all_algorithms()``, and ``select(request)`` (the selectors' choice, or None)."""

    def __init__(self, algorithms, selector=None, fallback_selector=None):
        self.algorithms = algorithms
        self._selector = selector
        self._fallback = fallback_selector

    def get_all_algorithms(self):
        return [a for by_name in self.algorithms.values() for a in by_name.values()]

    def __getitem__(self, collective):
        return self.algorithms[collective]

    def __iter__(self):
        return iter(self.get_all_algorithms())

    def __len__(self):
        return len(self.get_all_algorithms())

    def select(self, request):
        algo = self._selector(self.algorithms, request) if self._selector else None
        if algo is None and self._fallback:
            algo = self._fallback(self.algorithms, request)
        return algo


def _bindings():
    from .. import bindings

    return bindings


class AlgorithmCollectionBuilder:
    """The process's algorithms and selectors (a singleton, as in MSCCL++); see the module."""

    _instance = None

    def __new__(cls):
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __init__(self):
        if getattr(self, "_initialized", False):
            return
        self._initialized = True
        self._dsl = []          # DSL Algorithms added, in order
        self._nccl_index = {}   # id(algorithm) -> index in the NCCL-API library
        self._extra = []        # add_algorithm (the runtime's extra algorithms)
        self._selector = None
        self._fallback = None
        self._callback = None   # the ctypes callback the NCCL-API library holds
        self._map = None        # algorithms as selectors see them (cached)

    # ---- MSCCL++'s methods ---------------------------------------------------------------

    @classmethod
    def reset(cls):
        """Forget every algorithm and selector, here and in the NCCL-API library (whose later
        calls then select as if none was ever added); the next ``AlgorithmCollectionBuilder()``
        is a new, empty builder."""
        inst = cls._instance
        if inst is None:
            return
        lib = nccl_library() if inst._nccl_index or inst._callback else None
        if lib is not None:
            lib.mscclpp_nccl_ext_reset()
        inst._callback = None
        cls._instance = None

    def add_algorithm_builder(self, algorithm_builder):
        """Add a DSL algorithm: what ``mscclpp.compile`` returns, a DSL ``mscclpp.Algorithm``,
        or an object whose ``build()`` returns one of those. It joins ``build()``'s collection
        and, when the NCCL-API library is loaded, the plans the library selects from."""
        b = _bindings()
        algo = algorithm_builder
        if not isinstance(algo, b.Algorithm) and not _is_compiled(algo) and \
                callable(getattr(algo, "build", None)):
            algo = algo.build()
        if _is_compiled(algo):
            algo = b.Algorithm(algo.name, algo.collective, compiled=algo, tags=algo.tags,
                               message_size_range=algo.message_range)
        if not isinstance(algo, b.Algorithm) or not algo.is_dsl_algorithm():
            raise ValueError("add_algorithm_builder takes a DSL algorithm (mscclpp.compile's "
                             "result or a DSL mscclpp.Algorithm), or a builder of one; got "
                             f"{type(algorithm_builder).__name__}")
        self._dsl.append(algo)
        self._map = None
        self._sync_nccl()
        return algo

    def set_algorithm_selector(self, selector):
        """``selector(algorithms, request)`` -> an algorithm of ``algorithms``, or None."""
        self._selector = selector
        self._sync_nccl()

    def set_fallback_algorithm_selector(self, selector):
        """Asked when the selector returns None (same signature)."""
        self._fallback = selector
        self._sync_nccl()

    def build(self):
        """The added algorithms and the selectors, as an :class:`AlgorithmCollection`."""
        self._sync_nccl()
        coll = {}
        for a in self._dsl + self._extra:
            coll.setdefault(a.collective, {})[a.name] = a
        return AlgorithmCollection(coll, self._selector, self._fallback)

    def build_default_algorithms(self, scratch_buffer=0, scratch_buffer_size=0, rank=0):
        """The default algorithms: ``default_<collective>`` for every collective the library
        serves (each selects a registered plan by size), MSCCL++'s allreduce names, and any
        added with :meth:`add_algorithm`. The scratch buffer is accepted for MSCCL++
        compatibility; the executor allocates its own scratch per plan."""
        b = _bindings()
        algos = [b.Algorithm(f"default_{c}", c, tags={"default": 1}) for c in b._COLLECTIVES]
        algos += [b.Algorithm(n, "allreduce", tags={"default": 1})
                  for n in b._MSCCLPP_ALLREDUCE_NAMES]
        return algos + list(self._extra)

    def add_algorithm(self, algorithm):
        """Add an algorithm to :meth:`build_default_algorithms`' list (the runtime only)."""
        self._extra.append(algorithm)
        self._map = None

    # ---- the NCCL-API library ---------------------------------------------------------------

    def nccl_calls(self, algorithm):
        """How many NCCL collective calls of this process the added DSL ``algorithm`` served
        (0 when the NCCL-API library never got it)."""
        lib = nccl_library()
        idx = self._nccl_index.get(id(algorithm))
        if lib is None or idx is None:
            return 0
        n = ctypes.c_uint64()
        if lib.mscclpp_nccl_plan_calls(idx, ctypes.byref(n)) != 0:
            return 0
        return n.value

    def _sync_nccl(self):
        """Hand new plans and the selectors to the NCCL-API library, if one is loaded."""
        lib = nccl_library()
        if lib is None:
            return False
        for a in self._dsl:
            if id(a) in self._nccl_index:
                continue
            text = a._compiled.plan_json if a._compiled is not None else None
            if text is None:
                continue   # a plan loaded from a file by the runtime: not handed over
            data = text.encode()
            idx = ctypes.c_int(-1)
            rc = lib.mscclpp_nccl_add_plan(data, len(data), ctypes.byref(idx))
            if rc != 0:
                b = _bindings()
                raise b.MscclppError(f"mscclpp.ext: the NCCL-API library refused DSL plan "
                                     f"{a.name!r}: {b._lib().mscclpp_last_error().decode()} "
                                     f"(error {rc})")
            self._nccl_index[id(a)] = idx.value
        if (self._selector or self._fallback) and self._callback is None:
            self._callback = _SELECTOR_FN(self._select_for_nccl)
            lib.mscclpp_nccl_set_selector(self._callback, None)
        elif not (self._selector or self._fallback) and self._callback is not None:
            lib.mscclpp_nccl_set_selector(_SELECTOR_FN(), None)
            self._callback = None
        return True

    def _algorithms(self):
        if self._map is None:
            m = {}
            for a in self.build_default_algorithms() + self._dsl:
                m.setdefault(a.collective, {})[a.name] = a
            self._map = m
        return self._map

    def _select_for_nccl(self, req_p, _user):
        """The C selector (include/mscclpp/nccl_ext.h): runs in the thread of the NCCL call."""
        try:
            r = req_p.contents
            dt = None
            if r.dtype >= 0:
                dt = _bindings().DataType(r.dtype)
            req = CollectiveRequest(
                collective=r.collective.decode(), message_size=r.message_size,
                world_size=r.world_size, n_ranks_per_node=r.n_ranks_per_node, rank=r.rank,
                input_buffer=r.input_buffer or 0, output_buffer=r.output_buffer or 0,
                stream=r.stream or 0, dtype=dt,
                hints={"root": [r.root]} if r.root >= 0 else {})
            algos = self._algorithms()
            algo = self._selector(algos, req) if self._selector else None
            if algo is None and self._fallback:
                algo = self._fallback(algos, req)
            return self._choice(algo)
        except BaseException:  # a selector's bug fails the NCCL call, with the traceback here
            print("mscclpp.ext: the algorithm selector raised (the NCCL call fails):",
                  file=sys.stderr)
            traceback.print_exc()
            return _SELECT_ERROR

    def _choice(self, algo):
        if algo is None:
            return SELECT_NATIVE   # both declined: the library's own algorithms, then NCCL
        idx = self._nccl_index.get(id(algo))
        if idx is not None:
            return idx
        if getattr(algo, "is_native_algorithm", lambda: False)():
            raise TypeError(f"selector chose native algorithm {algo.name!r}: native modules "
                            f"do not run through the NCCL API; return a DSL or default "
                            f"algorithm")
        if algo.is_dsl_algorithm():
            raise ValueError(f"selector chose DSL algorithm {algo.name!r}, which was not added "
                             f"with add_algorithm_builder")
        return SELECT_NATIVE       # a default algorithm: the library's own


def _is_compiled(obj):
    return type(obj).__name__ == "CompiledAlgorithm" and hasattr(obj, "plan_json")


atexit.register(AlgorithmCollectionBuilder.reset)
