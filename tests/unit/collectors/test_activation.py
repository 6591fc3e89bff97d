"""The recorder on the paper's layer (bf16, native dropout, CPU): measured == model + LayerNorm statistics."""

from collections import Counter

import pytest
import torch
import torch.nn.functional as F

from tests.helpers.ref_layer import RefLayer, layer_input
from tracekit.analyzers.memory.activation_compare import compare_activation_memory
from tracekit.analyzers.memory.activation_model import MemoryConfig, activation_model
from tracekit.analyzers.memory.bill_of_materials import bill_of_materials
from tracekit.collectors.activation import activation_memory
from tracekit.model.activation import peak_from_memory_events

SHAPES = [(32, 2, 64, 4), (48, 3, 96, 8)]
LAYOUTS = [(1, False), (2, False), (2, True)]


def _run(s, b, h, a, tp, sp, n_layers=2):
    torch.manual_seed(0)
    model = torch.nn.Sequential(*(RefLayer(h, a, tp, sp) for _ in range(n_layers)))
    with activation_memory(model, peak="none", rank=0) as rec:
        model(layer_input(s, b, h, tp, sp)).float().sum().backward()
    return rec.result()


@pytest.mark.parametrize("s,b,h,a", SHAPES)
@pytest.mark.parametrize("tp,sp", LAYOUTS)
def test_measured_equals_model_per_layer(s, b, h, a, tp, sp):
    result = _run(s, b, h, a, tp, sp)
    cfg = MemoryConfig(s, b, h, a, tp=tp, sp=sp, layernorm_stat_bytes=2)  # bf16 mean/rstd on CPU
    model = activation_model(cfg)
    assert [x.measured_bytes for x in result.layers] == [model.total_bytes] * 2
    assert model.layernorm_stats_bytes == 2 * 2 * (s // (tp if sp else 1)) * b * 2
    assert result.last.outside_layers_bytes == 0
    # tensor by tensor: the saved tensors of a layer are the bill of materials (sizes and mask widths)
    layer0 = [r for r in result.last.tensors if r.layer == 0]
    assert Counter(r.nbytes for r in layer0) == Counter(x.bytes for x in bill_of_materials(cfg))
    assert Counter(r.dtype for r in layer0)["bool"] == 3  # two activation masks and the attention-probs mask
    rows = compare_activation_memory([result], cfg).to_dict()["layers"]
    assert {(r["layer"], r["measured_bytes"] - r["model_bytes"]) for r in rows} == {(0, 0), (1, 0)}


def test_a_storage_saved_twice_counts_once_and_parameters_are_not_activations():
    lin = torch.nn.Linear(64, 64)
    x = torch.randn(16, 64, requires_grad=True)
    with activation_memory(lin, layers=[lin], peak="none") as rec:
        y = lin(x)
        z = (y * y).sum()  # mul saves y twice (self and other): one storage
        w = x[:8] * 3.0 + x.view(-1)[:10].sum()  # views of x: inside x's already counted storage
    tensors = rec.result().last.tensors
    assert rec.result().saved_bytes == x.numel() * 4 + y.numel() * 4
    assert all(t.shape != (64, 64) for t in tensors)  # the weight saved by addmm is a parameter
    del z, w


def test_autocast_weight_copies_are_parameters():
    lin = torch.nn.Linear(32, 32)
    x = torch.randn(8, 32)
    with activation_memory(lin, peak="none") as rec, torch.autocast("cpu", dtype=torch.bfloat16):
        lin(x)
    kept = rec.result().last.tensors
    assert [(t.shape, t.dtype) for t in kept] == [((8, 32), "bfloat16")]  # the cast input; not the cast weight


def test_f_dropout_on_cpu_keeps_a_mask_in_the_activation_dtype():
    x = torch.randn(64, 32, dtype=torch.bfloat16, requires_grad=True)
    m = torch.nn.Identity()
    with activation_memory(m, peak="none") as rec:
        F.dropout(m(x), 0.1, True)
        rec.step()
        torch.native_dropout(m(x), 0.1, True)
    functional, native = (s.saved_bytes for s in rec.result().steps)
    assert (functional, native) == (x.numel() * 2, x.numel() * 1)


def test_steps_layer_mapping_and_module_attribution():
    torch.manual_seed(0)
    layers = torch.nn.ModuleList([RefLayer(64, 4), RefLayer(64, 4)])
    model = torch.nn.Module()
    model.layers = layers
    model.forward = lambda x: layers[1](layers[0](x))
    x = layer_input(32, 2, 64)
    with activation_memory(model, layers="layers", peak="none") as rec:
        for _ in range(2):
            model(x).float().sum().backward()
            rec.step()
    res = rec.result()
    assert len(res.steps) == 2 and res.steps[0].layers == res.steps[1].layers
    assert [x.name for x in res.layers] == ["layers.0", "layers.1"]
    ln = {m.module: m.saved_bytes for m in res.last.modules}
    assert ln["layers.0.ln1"] == 32 * 2 * 64 * 2 + 2 * 32 * 2 * 2  # its input and its bf16 mean and rstd


def test_peak_from_memory_events_by_hand():
    events = [(10, 100), (20, 50), (30, -100), (40, 200), (50, -250), (60, 1000)]
    assert peak_from_memory_events(events, [(0, 55), (15, 35), (55, 70)]) == [250, 50, 1000]


def test_cpu_peak_sees_a_known_allocation():
    m = torch.nn.Identity()
    with activation_memory(m, peak="profiler") as rec:
        a = torch.empty(3_000_000, dtype=torch.uint8)
        b = torch.empty(1_000_000, dtype=torch.uint8)
        del a, b
        rec.step()
        c = m(torch.empty(500_000, dtype=torch.uint8))
        del c
    peaks = [s.peak_over_start_bytes for s in rec.result().steps]
    assert 4_000_000 <= peaks[0] < 4_000_000 + 65536
    assert 500_000 <= peaks[1] < 500_000 + 65536


def test_reentrant_checkpoint_keeps_only_the_layer_input():
    from torch.utils.checkpoint import checkpoint

    torch.manual_seed(0)
    layer = RefLayer(64, 4)
    x = layer_input(32, 2, 64)
    with activation_memory(layer, layers=[layer], peak="none") as rec:
        checkpoint(layer, x, use_reentrant=True).float().sum().backward()
    full = activation_model(MemoryConfig(32, 2, 64, 4, recompute="full"))
    # the checkpoint's saved input lies outside the layer's own forward; recomputation in backward is skipped
    assert rec.result().saved_bytes == rec.result().last.outside_layers_bytes == full.paper_bytes == x.numel() * 2
