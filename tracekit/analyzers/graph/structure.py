"""The dependency graph's data: node, chain and edge kinds, the frozen Graph and the parts it is built from.
See tracekit.analyzers.graph.build for how it is built and what its fields mean."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import numpy as np

from ...model.events import EventKind

# node kinds, as on the critical path
KINDS = ("compute", "comm_transfer", "comm_wait", "host", "memcpy", "idle")
COMPUTE, TRANSFER, WAIT, HOST, MEMCPY, IDLE = range(6)
# chain types
HOST_CHAIN, DEVICE_CHAIN, WORKER_CHAIN, BARRIER_CHAIN = range(4)
# edge types (their residual delay's kind on the path in EDGE_KIND)
LAUNCH, SYNC, STREAM_WAIT, ISSUE, GLOO_WAIT, ARRIVE, RELEASE = range(7)
EDGE_KIND = (HOST, HOST, IDLE, HOST, HOST, WAIT, WAIT)
CHAIN_GAP_KIND = (HOST, IDLE, IDLE, WAIT)
# how a host wait for the device was found (the ``rule`` of its SYNC edge): a sync call, a blocked launch or copy,
# a scalar read, the caching allocator's cudaFree/cudaMalloc, a gap with no op (host_waits.py)
WAIT_RULES = ("sync_call", "blocking_call", "scalar_read", "allocator", "host_gap")
SYNC_CALL, BLOCKING_CALL, SCALAR_READ, ALLOCATOR, HOST_GAP = range(5)

HOST_SYNC_CALLS = re.compile(r"^(cuda|hip)(Stream|Device|Event|Ctx)Synchroni[sz]e")
# calls that block when the device is behind: a full launch queue, a copy from/to pageable memory
BLOCKING_CALLS = re.compile(r"^(cuda|hip)(LaunchKernel|LaunchKernelExC|MemcpyAsync|Memcpy|MemsetAsync)$")
AUTOGRAD_OP = "autograd::engine::evaluate_function"  # ops the autograd engine runs (on its own thread on GPUs)
BLOCKED_NS = 50_000  # a blocking call this long, with device work ending inside it, waited for the device
HOST_KINDS = (
    EventKind.CPU_OP,
    EventKind.CPU_COMM_OP,
    EventKind.ANNOTATION,
    EventKind.RUNTIME,
    EventKind.STEP,
    EventKind.SYNC,
    EventKind.OTHER,
)
DEVICE_NODE_KINDS = (EventKind.KERNEL, EventKind.COMM, EventKind.MEMCPY, EventKind.MEMSET)
NEG = -(2**60)
# how far the input that bound a node may finish from the node's start and still account for it: past the launch
# calls' own time (5-20 µs), kernel-to-kernel gaps on a busy stream (~1 µs) and a sync's return (5-15 µs), all
# measured on the GPU traces in tests/data (docs/whatif.md); a larger gap is time no recorded dependency explains
TOLERANCE_NS = 20_000


@dataclass(frozen=True, slots=True)
class Window:
    """One step window on one rank (tracekit.analyzers.graph.windows): from its device span's start to its end, the
    node at which it ends, and how long after that node's end the window ends (``tail_ns``, 0 where it ends there)."""

    step: int
    rank: int
    end_node: int
    start_ns: int  # measured, aligned, relative to base_ns
    end_ns: int
    tail_ns: int = 0
    complete: bool = True  # the analysis holds the step whole (StepPlan.complete)
    end_nodes: tuple[int, ...] = ()  # the host piece at the host window's end, the step's last node on each stream


@dataclass(frozen=True, slots=True)
class Graph:
    """Nodes sorted by (chain, order in the chain). ``row`` is the node's event row in its rank's table (the
    innermost op of a host piece; -1 for a gap, a barrier or a collective's arrival marker)."""

    chain: np.ndarray  # int64, sorted
    start: np.ndarray  # int64 measured start
    dur: np.ndarray  # int64 own duration (what a replay scales)
    gap: np.ndarray  # int64 measured residual of the chain edge into the node (0 for a chain's first node)
    fixed: np.ndarray  # int64 earliest start from outside the graph (NEG for none)
    kind: np.ndarray  # int8, index into KINDS
    rank: np.ndarray  # int64
    row: np.ndarray  # int64
    dimension: np.ndarray  # object: a collective transfer's parallel dimension, "" elsewhere
    chain_type: np.ndarray  # per chain
    chain_rank: np.ndarray  # per chain
    chain_lane: np.ndarray  # per chain: thread or stream id
    src: np.ndarray  # edges
    dst: np.ndarray
    anchor_end: np.ndarray  # bool: the edge leaves the source's end (else its start)
    delay: np.ndarray  # int64: natural delay, plus the residual where the edge bound its destination
    etype: np.ndarray  # int8
    resid: np.ndarray  # int64 per edge: the residual it carries (tracekit.analyzers.graph.evidence), 0 elsewhere
    rule: np.ndarray  # int8 per edge: for a host wait, how it was inferred (WAIT_RULES), else -1
    bind: np.ndarray  # int64 per node: the input that bound it in the trace (-1 chain, -2 none, else the edge)
    windows: tuple[Window, ...]
    base_ns: int
    shifts: dict[int, int]  # rank -> what was subtracted from its table's times (base + clock offset)
    notes: tuple[str, ...] = ()
    first: np.ndarray = field(init=False, repr=False, compare=False)  # chain-first flags

    def __post_init__(self) -> None:
        f = np.ones(len(self.chain), bool)
        f[1:] = self.chain[1:] != self.chain[:-1]
        object.__setattr__(self, "first", f)

    def __len__(self) -> int:
        return len(self.chain)

    @property
    def end(self) -> np.ndarray:
        return self.start + self.dur


class Parts:
    """Nodes and edges collected rank by rank, before the residuals are computed."""

    def __init__(self) -> None:
        self.nodes: list[dict[str, np.ndarray]] = []
        self.edges: list[dict[str, np.ndarray]] = []
        self.n = 0
        self.chains = 0
        self.chain_info: list[tuple[int, int, int]] = []  # (type, rank, lane)
        self.dims: list[tuple[np.ndarray, np.ndarray]] = []  # (transfer nodes, their dimension)

    def add_nodes(self, **cols: np.ndarray) -> np.ndarray:
        k = len(cols["start"])
        self.nodes.append(cols)
        ids = np.arange(self.n, self.n + k)
        self.n += k
        return ids

    def add_chains(self, ctype: int, rank: int, lanes: np.ndarray) -> int:
        first = self.chains
        self.chain_info += [(ctype, rank, int(x)) for x in lanes]
        self.chains += len(lanes)
        return first

    def add_edges(self, src, dst, anchor_end, natural, etype: int, rule=-1) -> None:
        src, dst = np.asarray(src, np.int64), np.asarray(dst, np.int64)
        if not len(src):
            return
        self.edges.append(
            {
                "src": src,
                "dst": dst,
                "anchor_end": np.broadcast_to(anchor_end, src.shape).astype(bool),
                "delay": np.broadcast_to(natural, src.shape).astype(np.int64),
                "etype": np.full(len(src), etype, np.int8),
                "rule": np.broadcast_to(rule, src.shape).astype(np.int8),
            }
        )
