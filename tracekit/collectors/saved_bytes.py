"""Counting the bytes of saved tensors once per storage, and telling activations from parameters.

A saved tensor keeps its storage alive. Several saved tensors often share one storage (Q and K as views of
the fused QKV output, a tensor saved by two ops); the union of the byte extents the saved views span in each
storage is what is counted, so shared bytes count once. Parameters saved for backward (the weight a matmul
saves, or a view of it) are not activations: a tensor whose storage is a parameter's or a buffer's, or that is
a cast/view chain of a parameter (autocast's bf16 weight copy), is left out.

A storage is keyed by its address, and an address outlives its storage: once a saved tensor is freed (after the
backward of its microbatch, under gradient accumulation or a pipeline schedule) the allocator hands the same
address to a later microbatch's tensor. So the union keeps a weak reference to the storage each address was
first seen with (:class:`torch.multiprocessing.reductions.StorageWeakRef`: it never keeps the memory alive), and
an address whose storage has expired starts afresh: the new storage counts in full.
"""

from __future__ import annotations

import weakref
from typing import Protocol

import torch
from torch.multiprocessing.reductions import StorageWeakRef

# grad_fn nodes that only view, cast or transpose: a parameter seen through them is still a parameter
_PASS_THROUGH = (
    "ToCopyBackward",
    "TBackward",
    "ViewBackward",
    "TransposeBackward",
    "PermuteBackward",
    "ExpandBackward",
    "UnsafeViewBackward",
    "ReshapeAliasBackward",
    "AliasBackward",
    "CloneBackward",
)


def storage_key(tensor: torch.Tensor) -> tuple[str, int]:
    """(device, storage address): the identity of the memory a tensor lives in."""
    return str(tensor.device), tensor.untyped_storage().data_ptr()


def byte_extent(tensor: torch.Tensor) -> tuple[int, int]:
    """[first, last + 1) bytes of the storage that a (possibly strided) view spans."""
    item = tensor.element_size()
    if tensor.numel() == 0:
        return 0, 0
    span = 1 + sum((n - 1) * abs(st) for n, st in zip(tensor.shape, tensor.stride()))
    start = tensor.storage_offset() * item
    return int(start), int(min(start + span * item, tensor.untyped_storage().nbytes()))


def is_parameter_derived(tensor: torch.Tensor, param_keys: set[tuple[str, int]]) -> bool:
    """True for a parameter, a view of one, or a cast/view chain ending at a parameter (autocast copies)."""
    if isinstance(tensor, torch.nn.Parameter) or storage_key(tensor) in param_keys:
        return True
    node = tensor.grad_fn
    for _ in range(6):
        if node is None or not node.name().startswith(_PASS_THROUGH):
            return False
        nexts = [n for n, _ in node.next_functions if n is not None]
        if len(nexts) != 1:
            return False
        node = nexts[0]
        if node.name() == "torch::autograd::AccumulateGrad":
            return isinstance(getattr(node, "variable", None), torch.nn.Parameter)
    return False


class Liveness(Protocol):
    """A weak handle on what a key stood for when first seen: ``expired()`` once that memory is freed."""

    def expired(self) -> bool: ...


class _TensorRef:
    """Liveness of a tensor without a plain storage (a wrapper subclass), keyed by ``id``: ids are reused too."""

    __slots__ = ("_ref",)

    def __init__(self, tensor: torch.Tensor) -> None:
        self._ref = weakref.ref(tensor)

    def expired(self) -> bool:
        return self._ref() is None


def storage_ref(tensor: torch.Tensor) -> Liveness | None:
    """A weak reference to the storage a tensor lives in (None where torch offers none: then the address alone
    identifies the storage, as before)."""
    try:
        return StorageWeakRef(tensor.untyped_storage())
    except (AttributeError, RuntimeError, NotImplementedError, TypeError):
        return None


def tensor_ref(tensor: torch.Tensor) -> Liveness | None:
    try:
        return _TensorRef(tensor)
    except TypeError:
        return None


class StorageUnion:
    """The union of byte intervals saved from each storage; ``add`` returns the bytes that were new.

    ``ref`` (from :func:`storage_ref`) tells a storage that is still alive from one freed since and now reused
    at the same address: an expired key's intervals are dropped and the new storage counts in full. Without
    ``ref`` a key is the storage for the union's whole life (what a single forward pass can assume)."""

    __slots__ = ("_intervals", "_refs")

    def __init__(self) -> None:
        self._intervals: dict[tuple, list[tuple[int, int]]] = {}
        self._refs: dict[tuple, Liveness] = {}

    def add(self, key: tuple, start: int, end: int, ref: Liveness | None = None) -> int:
        if end <= start:
            return 0
        old = self._refs.get(key)
        if old is not None and old.expired():
            self._intervals.pop(key, None)  # what was counted stays counted; the address holds a new storage
            del self._refs[key]
        if ref is not None and key not in self._refs:
            self._refs[key] = ref
        merged, new_bytes, lo, hi = [], end - start, start, end
        for a, b in self._intervals.get(key, ()):
            if b < lo or a > hi:
                merged.append((a, b))
                continue
            new_bytes -= max(0, min(b, end) - max(a, start))
            lo, hi = min(lo, a), max(hi, b)
        merged.append((lo, hi))
        self._intervals[key] = sorted(merged)
        return new_bytes

    def total_bytes(self) -> int:
        """The bytes of the storages now held (a storage freed and its address reused: only the newest)."""
        return sum(b - a for ivs in self._intervals.values() for a, b in ivs)

    def clear(self) -> None:
        self._intervals.clear()
        self._refs.clear()
