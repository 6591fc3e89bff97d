"""Activation memory with several microbatches a step (gradient accumulation, the 1F1B pipeline): a microbatch's
storages are freed after its backward and a later one is allocated at the same addresses, which must count anew.
A layer's figure is the sum over the step's microbatches: M times one microbatch's bytes, which for the
Korthikanti et al. model (linear in b) is the model at the step's whole batch.

Oracles: a hand-counted MLP (each Linear saves its input, ReLU its output), ``activation_model`` for the built-in
layer in one process, and for ``pp`` the pipeline's own per-microbatch count (its hooks, independent of the
recorder's union) and the model configured from the test's shapes. Each loop also checks, with its own chained
hooks, that addresses were in fact reused (the case the address-only union got wrong).
"""

from __future__ import annotations

import io
import logging

import pytest
import torch

from tracekit.analyzers.memory.activation_model import MemoryConfig, activation_model
from tracekit.collectors.activation import activation_memory
from tracekit.collectors.saved_bytes import StorageUnion, storage_ref
from tracekit.collectors.workloads.layer import Layer, Parallel, full_weights


class _Addresses:
    """Saved-tensor hooks inside the recorder's that note each saved storage's address, then hand the tensor on
    to the recorder's hooks (the pipeline's InFlight chains the same way)."""

    def __init__(self):
        self.per_microbatch: list[set[int]] = []

    def __enter__(self):
        outer = torch._C._autograd._top_saved_tensors_default_hooks(True)
        seen: set[int] = set()
        self.per_microbatch.append(seen)

        def pack(t):
            seen.add(t.untyped_storage().data_ptr())
            return outer[0](t)

        self._hooks = torch.autograd.graph.saved_tensors_hooks(pack, outer[1])
        self._hooks.__enter__()
        return self

    def __exit__(self, *exc):
        self._hooks.__exit__(*exc)

    def reused(self) -> bool:
        """Some microbatch saved into an address an earlier microbatch of the step had saved into."""
        return any(self.per_microbatch[k] & set().union(*self.per_microbatch[:k]) for k in range(1, len(self.per_microbatch)))


def test_a_freed_storage_at_a_reused_address_counts_anew():
    """The union by hand, with real storages and one key standing for the shared address."""
    union, key = StorageUnion(), ("cpu", 4096)
    a = torch.empty(256)  # 1,024 bytes
    assert union.add(key, 0, 1024, storage_ref(a)) == 1024
    assert union.add(key, 0, 512, storage_ref(a)) == 0  # still alive: the same storage, counted once
    del a
    b = torch.empty(128)
    assert union.add(key, 0, 512, storage_ref(b)) == 512  # a was freed: b is a new storage
    assert union.add(key, 256, 768, storage_ref(b)) == 256  # b's own extents merge as before
    assert union.total_bytes() == 768
    plain = StorageUnion()  # no liveness given: the key is one storage (what a single forward may assume)
    assert plain.add(key, 0, 1024) == 1024 and plain.add(key, 0, 1024) == 0


class _Block(torch.nn.Module):
    """Linear(h, 4h) -> ReLU -> Linear(4h, h): saves its input (n·h) and the ReLU output (n·4h), which the second
    Linear saves again (same storage). 20·n·h bytes in fp32."""

    def __init__(self, h):
        super().__init__()
        self.up, self.act, self.down = torch.nn.Linear(h, 4 * h), torch.nn.ReLU(), torch.nn.Linear(4 * h, h)

    def forward(self, x):
        return self.down(self.act(self.up(x)))


@pytest.mark.parametrize("microbatches", [1, 4])
def test_gradient_accumulation_counts_every_microbatch(microbatches):
    n, h, steps = 16, 32, 2
    torch.manual_seed(0)
    model = torch.nn.Sequential(_Block(h), _Block(h))
    data = torch.randn(n * microbatches, h)
    with activation_memory(model, peak="none") as rec:
        for _ in range(steps):
            seen = _Addresses()
            for mb in data.chunk(microbatches):
                with seen:
                    (model(mb.clone()) ** 2).sum().backward()
            rec.step()
    result = rec.result()
    want = microbatches * 20 * n * h
    assert len(result.steps) == steps
    for step in result.steps:
        assert [x.measured_bytes for x in step.layers] == [want, want]
        assert step.outside_layers_bytes == microbatches * n * h * 4  # the loss's pow saves the output
    if microbatches > 1:
        assert seen.reused()  # the allocator did hand the freed addresses back: the case being tested


def test_built_in_layer_with_gradient_accumulation_is_m_times_the_model():
    """bf16, native dropout, 2 layers, M = 4 microbatches of b = 2: M x model(b) = model(M·b), to the byte."""
    s, b, h, a, m = 32, 2, 64, 4, 4
    layers = torch.nn.ModuleList(Layer(full_weights(h, i, 0), a, Parallel(), s, 0.1, torch.bfloat16) for i in range(2))
    pos = torch.arange(s)
    x = torch.randn(s, m * b, h, dtype=torch.bfloat16)

    def forward(y):
        for layer in layers:
            y = layer(y, pos)
        return y

    seen = _Addresses()
    with activation_memory(layers, peak="none") as rec:
        for mb in x.chunk(m, dim=1):
            with seen:
                forward(mb.contiguous()).float().pow(2).sum().backward()
    one = activation_model(MemoryConfig(s, b, h, a, layernorm_stat_bytes=2)).total_bytes
    assert one == 180_736
    assert activation_model(MemoryConfig(s, m * b, h, a, layernorm_stat_bytes=2)).total_bytes == m * one
    assert [x.measured_bytes for x in rec.result().layers] == [m * one, m * one]
    assert seen.reused()


def test_a_counting_failure_is_a_warning_and_training_goes_on(caplog):
    """A saved tensor the recorder cannot count (here: a parameter set it cannot compare against) leaves the
    backward intact and says so once."""
    lin = torch.nn.Linear(8, 8)
    x = torch.randn(4, 8)
    with caplog.at_level(logging.WARNING, logger="tracekit.activation"):
        with activation_memory(lin, layers=[lin], peak="none") as rec:
            rec._param_keys = None  # type: ignore[assignment]  # membership tests now raise TypeError
            lin(x).sum().backward()
            lin(x).sum().backward()
    assert lin.weight.grad is not None and torch.allclose(lin.weight.grad, 2 * x.sum(0).expand(8, 8))
    assert len([r for r in caplog.records if "could not count a saved tensor" in r.message]) == 1


@pytest.mark.slow
def test_pp_per_layer_table_sums_the_microbatches(tmp_path):
    """`tracekit run --workload pp --pp 2 --microbatches 4 --activation-memory` at tiny shapes: every rank's layers
    equal the model at the rank's whole batch (4 microbatches of 2), and a stage's layers plus what it saved
    outside them (the loss) equal the sum of the pipeline's own per-microbatch counts."""
    from tracekit.analyzers.memory.activation_run import activation_from_dir
    from tracekit.cli.run import digest
    from tracekit.collectors.workloads.config import WorkloadConfig
    from tracekit.collectors.workloads.runner import run_batch
    from tracekit.formats.activation import read_activation
    from tracekit.reports import get_reporter
    from tracekit.reports.workload import WorkloadDigest

    m, s, batch, h, a = 4, 32, 8, 32, 4
    cfg = WorkloadConfig(
        workload="pp",
        pp=2,
        microbatches=m,
        layers=2,
        seq=s,
        batch=batch,
        hidden=h,
        heads=a,
        dropout=0.1,
        steps=1,
        wait=0,
        warmup=1,
        activation_memory=True,
    )
    [result] = run_batch([(cfg, tmp_path / "pp")])
    layer = activation_model(
        MemoryConfig(s, batch // m, h, a, bytes_per_element=4, mask_bytes=1, layernorm_stat_bytes=4)
    ).total_bytes
    per_stage = {p["stage"]: p for p in result.pipeline}
    assert len(result.activation_paths) == 2
    for path in result.activation_paths:
        got = read_activation(path)
        stage = got.rank  # pp only: rank = stage
        assert [x.measured_bytes for x in got.layers] == [m * layer]
        assert (
            per_stage[stage]["microbatch_bytes"]
            == [got.layers[0].measured_bytes // m + (s * (batch // m) * h * 4 if stage == 1 else 0)] * m
        )
        assert got.last.saved_bytes == sum(per_stage[stage]["microbatch_bytes"])
    comparison, warnings = activation_from_dir(result.out_dir)
    assert not warnings and comparison is not None
    assert [(r.rank, r.delta_bytes) for r in comparison.layers] == [(0, 0), (1, 0)]
    out = io.StringIO()
    get_reporter("text", document=WorkloadDigest).render(digest(result), out)
    assert "undercount" not in out.getvalue() and "sums each layer over the step's microbatches" in out.getvalue()
