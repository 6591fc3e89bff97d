"""The parallel layout of a run: one validated type for collectors, the run manifest, the loader, the memory
model, the analyzers and the gate.

A :class:`ParallelLayout` sizes the mesh axes tracekit names (tp, cp, dp, pp, ep) and says what two of them
serve: the tensor-parallel axis runs Megatron sequence parallelism when ``sequence_parallel`` is set, the
context-parallel axis is a ring (``CpKind.RING``, ring attention) or Ulysses (all-to-all). The world size is
the product of tp, cp, dp, pp and the sizes of any axis tracekit does not name (a manifest's ``"dp_shard": 4``:
an integer >= 1 under a name tracekit does not know is taken as such a size);
ep is carved out of the dp x cp ranks (Megatron's expert groups, torchtitan's ``ep`` borrowing from
``dp_shard`` and ``cp``), so it must divide dp x cp and does not multiply.

It is also a read-only mapping: its manifest form (``run.json``'s ``"layout"``). A layout built in code reads
as the collectors have always written it (tp, cp, dp, [pp, ep when not 1,] sequence_parallel, cp_kind,
world_size); one read from a manifest (:meth:`ParallelLayout.from_dict`) reads back exactly the keys it was
given, so summaries, reports and the gate see the run as recorded. An empty layout (no keys) is a run that
recorded none.

This module imports nothing from torch, the collectors, the analyzers or the gate.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from enum import Enum

from ..errors import ConfigError

Scalar = int | float | str | bool | None


class _StrEnum(str, Enum):
    """Members are their string values everywhere: JSON, f-strings, comparisons with plain strings."""

    def __str__(self) -> str:
        return str(self.value)

    def __format__(self, spec: str) -> str:
        return format(str(self.value), spec)


class Dimension(_StrEnum):
    """A parallel dimension: what a process group's collectives serve."""

    TP = "tp"
    SP = "sp"
    CP = "cp"
    ULYSSES = "ulysses"
    DP = "dp"
    PP = "pp"
    EP = "ep"
    UNKNOWN = "unknown"

    @classmethod
    def parse(cls, name: str) -> Dimension:
        """The member named ``name``; any other name is UNKNOWN."""
        try:
            return cls(str(name))
        except ValueError:
            return cls.UNKNOWN


class CpKind(_StrEnum):
    """How the context-parallel axis splits attention."""

    RING = "ring"  # ring attention: K/V shards travel round the cp ranks
    ULYSSES = "ulysses"  # all-to-all: every token, a/cp heads per rank

    @classmethod
    def parse(cls, value: object) -> CpKind:
        """``value`` ("ring", "ulysses" or a member) as a member; LayoutError for anything else."""
        try:
            return cls(value)
        except ValueError:
            raise LayoutError(f"cp_kind={value!r} is not one of {', '.join(k.value for k in cls)}") from None

    @property
    def dimension(self) -> Dimension:
        return Dimension.ULYSSES if self is CpKind.ULYSSES else Dimension.CP


SIZES = ("tp", "cp", "dp", "pp", "ep")  # the axes a ParallelLayout sizes
_MESH = ("tp", "cp", "dp", "pp")  # multiply into the world size (ep does not: it divides dp x cp)
_FLAGS = ("sequence_parallel", "sp")  # "sp": the spelling of some manifests and of the memory model
_KNOWN = (*SIZES, *_FLAGS, "cp_kind", "world_size")


class LayoutError(ConfigError):
    """A parallel layout that cannot be: ``where`` says whose, ``problem`` what is wrong and how to fix it."""

    def __init__(self, problem: str, where: str = "parallel layout"):
        super().__init__(f"{where}: {problem}")
        self.problem, self.where = problem, where

    def at(self, where: str) -> LayoutError:
        """The same problem, attributed to ``where`` (the caller that knows which option or file it came from)."""
        return LayoutError(self.problem, where)


@dataclass(frozen=True, slots=True, eq=False)
class ParallelLayout(Mapping[str, Scalar]):
    """Sizes of the parallel axes and what the tp and cp axes serve; validated on construction.

    ``other``: entries of a manifest's layout that tracekit does not name, kept verbatim (integers >= 1 are
    taken as axis sizes and count in the world size). ``recorded``: the manifest keys, in order, this layout reads back as
    (None: the collectors' own form). Equality is that of the manifest form."""

    tp: int = 1
    cp: int = 1
    dp: int = 1
    pp: int = 1
    ep: int = 1
    sequence_parallel: bool = False
    cp_kind: CpKind = CpKind.RING
    other: tuple[tuple[str, Scalar], ...] = ()
    recorded: tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        for name in SIZES:
            object.__setattr__(self, name, _check_size(name, getattr(self, name)))
        object.__setattr__(self, "cp_kind", CpKind.parse(self.cp_kind))
        object.__setattr__(self, "sequence_parallel", bool(self.sequence_parallel))
        if (self.dp * self.cp) % self.ep:
            raise LayoutError(
                f"ep={self.ep} must divide dp x cp = {self.dp * self.cp} (expert parallelism splits "
                "the data- and context-parallel ranks); change ep or dp"
            )
        for name, value in self.other:
            if name in _KNOWN or not isinstance(value, (int, float, str, bool, type(None))):
                raise LayoutError(f"{name}={value!r} is not a layout entry; give sizes as integers >= 1")
        if self.recorded is not None:
            names = {*_KNOWN, *(n for n, _ in self.other)}
            unknown = [k for k in self.recorded if k not in names]
            if unknown:
                raise LayoutError(f"recorded keys {unknown} are neither sizes, flags nor other entries")

    # -- construction from and to the run manifest ----------------------------------------------------------
    @classmethod
    def from_dict(cls, data: object, where: str = "layout") -> ParallelLayout:
        """The layout a manifest records (``run.json``'s ``"layout"``, a summary's ``run.layout``). Raises
        :class:`LayoutError` (a ConfigError, one line) naming ``where`` for anything malformed."""
        if not isinstance(data, Mapping):
            raise LayoutError(f'expected a mapping such as {{"tp": 2, "dp": 2}}, got {type(data).__name__}', where)
        kw: dict[str, object] = {}
        other: list[tuple[str, Scalar]] = []
        world: object = None
        for key, value in data.items():
            if not isinstance(key, str):
                raise LayoutError(f"key {key!r} is not a string", where)
            if key in _FLAGS:
                if not isinstance(value, bool):
                    raise LayoutError(f"{key}={value!r} must be true or false", where)
                if kw.setdefault("sequence_parallel", value) != value:
                    raise LayoutError("sp and sequence_parallel disagree; keep one of them", where)
            elif key == "world_size":
                world = value
            elif key in SIZES or key == "cp_kind":
                kw[key] = value
            else:
                other.append((key, value))
        try:
            layout = cls(**kw, other=tuple(other), recorded=tuple(data))  # type: ignore[arg-type]
        except LayoutError as exc:
            raise exc.at(where) from None
        if world is not None:
            try:
                _check_size("world_size", world)
            except LayoutError as exc:
                raise exc.at(where) from None
            if world != layout.world_size:
                raise LayoutError(
                    f"world_size={world} but the sizes multiply to {layout.world_size}; fix world_size or the sizes", where
                )
        return layout

    @classmethod
    def unknown(cls) -> ParallelLayout:
        """A run that recorded no layout: an empty mapping (its sizes read 1)."""
        return cls(recorded=())

    def to_dict(self) -> dict[str, Scalar]:
        """The manifest form: plain JSON values."""
        return dict(self.items())

    def _keys(self) -> tuple[str, ...]:
        if self.recorded is not None:
            return self.recorded
        extra = tuple(k for k in ("pp", "ep") if getattr(self, k) != 1)
        return ("tp", "cp", "dp", *extra, "sequence_parallel", "cp_kind", "world_size", *(k for k, _ in self.other))

    def __getitem__(self, key: str) -> Scalar:
        if key not in self._keys():
            raise KeyError(key)
        if key in SIZES:
            return int(getattr(self, key))
        if key in _FLAGS:
            return self.sequence_parallel
        if key == "cp_kind":
            return self.cp_kind.value
        if key == "world_size":
            return self.world_size
        return dict(self.other)[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._keys())

    def __len__(self) -> int:
        return len(self._keys())

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Mapping):
            return NotImplemented
        return dict(self.items()) == dict(other.items())

    def __hash__(self) -> int:
        return hash(tuple(self.items()))

    def __repr__(self) -> str:
        return f"ParallelLayout({self.to_dict()!r})"

    # -- what the layout says -------------------------------------------------------------------------------
    @property
    def world_size(self) -> int:
        """The product of the mesh sizes: tp x cp x dp x pp (x any integer entry tracekit does not name)."""
        sizes = [int(getattr(self, n)) for n in _MESH]
        sizes += [v for _, v in self.other if isinstance(v, int) and not isinstance(v, bool) and v >= 1]
        return math.prod(sizes)

    def size(self, dimension: Dimension | str) -> int:
        """The size of the axis serving ``dimension`` (sp is the tp axis, ulysses the cp axis); 1 otherwise."""
        dim = Dimension.parse(str(dimension))
        axis = {Dimension.SP: "tp", Dimension.ULYSSES: "cp"}.get(dim, dim.value)
        return int(getattr(self, axis)) if axis in SIZES else 1

    def sizes(self) -> dict[str, int]:
        """tp, cp, dp, pp, ep -> size."""
        return {name: int(getattr(self, name)) for name in SIZES}

    def dimension(self, axis: str) -> Dimension:
        """What the collectives of a group on ``axis`` serve: the tp axis is sp under sequence parallelism, the
        cp axis ulysses under Ulysses; any other axis name is UNKNOWN."""
        if axis == "tp":
            return Dimension.SP if self.sequence_parallel else Dimension.TP
        if axis == "cp":
            return self.cp_kind.dimension
        return Dimension.parse(axis) if axis in SIZES else Dimension.UNKNOWN

    @property
    def head_shards(self) -> int:
        """How many ways the attention heads split: tp, times cp under Ulysses."""
        return self.tp * (self.cp if self.cp_kind is CpKind.ULYSSES else 1)

    @property
    def sequence_shards(self) -> int:
        """How many ways the sequence of a layer's sequence region splits: cp, times tp under SP."""
        return self.cp * (self.tp if self.sequence_parallel else 1)

    def check_shape(self, *, seq: int, hidden: int, heads: int, where: str = "parallel layout") -> None:
        """Raise LayoutError unless a transformer of this shape shards evenly on the layout: hidden by heads,
        the heads over :attr:`head_shards`, the sequence over :attr:`sequence_shards`."""
        if hidden % heads:
            raise LayoutError(f"hidden={hidden} is not a multiple of heads={heads}", where)
        if heads % self.head_shards:
            raise LayoutError(
                f"heads={heads} must divide by tp (and cp for Ulysses); choose a head count that shards evenly", where
            )
        if seq % self.sequence_shards:
            raise LayoutError(f"seq={seq} must divide by cp{' * tp (SP)' if self.sequence_parallel else ''}", where)


def _check_size(name: str, value: object) -> int:
    """``value`` as an int >= 1 (numpy integers too; not bools, floats or strings)."""
    try:
        size = operator.index(value) if not isinstance(value, bool) else None  # type: ignore[arg-type]
    except TypeError:
        size = None
    if size is None:
        raise LayoutError(f"{name}={value!r} is not an integer; give sizes as integers >= 1")
    if size < 1:
        raise LayoutError(f"{name}={value} must be >= 1")
    return size
