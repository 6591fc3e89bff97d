"""The model against the paper's Table 2 expressions (typed in here) and against the tensor-by-tensor list."""

import pytest

from tracekit.analyzers.memory.activation_model import MemoryConfig, activation_model, embedding_output_terms
from tracekit.analyzers.memory.bill_of_materials import bill_of_materials
from tracekit.errors import ConfigError

SHAPES = [(2048, 1, 12288, 96), (4096, 4, 4096, 32), (512, 8, 1024, 16), (64, 2, 128, 8)]


def paper_table2(s, b, h, a, t, row):
    """Table 2 of arXiv:2205.05198, verbatim (16-bit activations, 1-byte masks)."""
    return {
        "none": s * b * h * (34 + 5 * a * s / h),
        "tp": s * b * h * (10 + 24 / t + 5 * a * s / (h * t)),
        "tp+sp": s * b * h * (34 / t + 5 * a * s / (h * t)),
        "tp+selective": s * b * h * (10 + 24 / t),
        "tp+sp+selective": s * b * h * 34 / t,
        "full": s * b * h * 2,
    }[row]


ROWS = {
    "none": dict(),
    "tp": dict(sp=False),
    "tp+sp": dict(sp=True),
    "tp+selective": dict(recompute="selective"),
    "tp+sp+selective": dict(sp=True, recompute="selective"),
    "full": dict(recompute="full"),
}


@pytest.mark.parametrize("s,b,h,a", SHAPES)
@pytest.mark.parametrize("row", sorted(ROWS))
@pytest.mark.parametrize("t", [1, 2, 4, 8])
def test_table2_rows(s, b, h, a, t, row):
    tp = 1 if row in ("none", "full") else t
    cfg = MemoryConfig(s, b, h, a, tp=tp, **ROWS[row])
    model = activation_model(cfg)
    assert model.paper_bytes == paper_table2(s, b, h, a, tp, row)
    assert model.paper_bytes == sum(x.bytes for x in bill_of_materials(cfg))


@pytest.mark.parametrize("s,b,h,a", SHAPES)
def test_the_replicated_term_is_ten_sbh(s, b, h, a):
    blocks = activation_model(MemoryConfig(s, b, h, a, tp=8)).terms
    replicated = sum(t.bytes for t in blocks if t.divided_by == "1")
    assert replicated == 10 * s * b * h
    sharded = activation_model(MemoryConfig(s, b, h, a, tp=8, sp=True)).terms
    assert all(t.divided_by == "t" for t in sharded)


@pytest.mark.parametrize("s,b,h,a", SHAPES)
@pytest.mark.parametrize("kind", ["ring", "ulysses"])
@pytest.mark.parametrize("cp,t,sp", [(2, 1, False), (4, 2, True), (2, 4, False)])
def test_context_parallel_divides_the_sequence(s, b, h, a, kind, cp, t, sp):
    cfg = MemoryConfig(s, b, h, a, tp=t, sp=sp, cp=cp, cp_kind=kind)
    sl = s // cp  # every sbh term sees s/cp tokens; the scores are (s/cp) x s (ring) or s x s for a/cp heads
    rep = 34 / t if sp else 10 + 24 / t
    expected = sl * b * h * rep + 5 * a * s * s * b / (t * cp)
    assert activation_model(cfg).paper_bytes == expected
    assert sum(x.bytes for x in bill_of_materials(cfg)) == expected


def test_ulysses_and_ring_differ_in_shape_not_bytes():
    ring = bill_of_materials(MemoryConfig(64, 2, 128, 8, cp=4))
    uly = bill_of_materials(MemoryConfig(64, 2, 128, 8, cp=4, cp_kind="ulysses"))
    q_ring, q_uly = (next(x for x in bom if x.name == "Q") for bom in (ring, uly))
    assert q_ring.shape == (2, 8, 16, 16) and q_uly.shape == (2, 2, 64, 16)
    assert sum(x.bytes for x in ring) == sum(x.bytes for x in uly)


def test_dropout_off_and_fp32_and_fused():
    s, b, h, a = 64, 2, 128, 8
    # no dropout: no masks, and the V matmul saves the softmax output itself
    assert activation_model(MemoryConfig(s, b, h, a, dropout=False)).paper_bytes == s * b * h * 32 + 2 * a * s * s * b
    # fp32 activations, 1-byte masks: 4e + 2m + 12e = 66; scores 2e + m = 9
    assert activation_model(MemoryConfig(s, b, h, a, bytes_per_element=4)).paper_bytes == s * b * h * 66 + 9 * a * s * s * b
    fused = activation_model(MemoryConfig(s, b, h, a, attention="fused"))
    assert fused.paper_bytes == 34 * s * b * h + 4 * a * s * b  # fp32 log-sum-exp instead of the s^2 terms


def test_layernorm_statistics_and_formula_strings():
    m = activation_model(MemoryConfig(64, 2, 128, 8, tp=2, sp=True, layernorm_stat_bytes=4))
    assert m.layernorm_stats_bytes == 2 * 2 * (64 // 2) * 2 * 4  # 2 LNs x (mean, rstd) x s/t x b x fp32
    assert m.total_bytes == m.paper_bytes + m.layernorm_stats_bytes
    assert activation_model(MemoryConfig(64, 2, 128, 8, tp=2)).formula == "sbh(10 + 24/t + 5as/(ht))"
    assert activation_model(MemoryConfig(64, 2, 128, 8)).formula == "sbh(34 + 5as/h)"


def test_embedding_and_output_terms_section_4_3():
    s, b, h, a, t, v = 2048, 1, 12288, 96, 8, 51200
    terms = embedding_output_terms(MemoryConfig(s, b, h, a, tp=t, sp=True), vocab=v)
    # the paper: embedding dropout sbhp/t, and 4sbh/t (1 + v/h) for the final LN, output input and fp32 logits
    assert sum(x.bytes for x in terms) == s * b * h / t + 4 * s * b * h / t * (1 + v / h)
    with_pp = embedding_output_terms(MemoryConfig(s, b, h, a, tp=t, sp=True), vocab=v, pipeline=4)
    assert sum(x.bytes for x in with_pp) == s * b * h * 4 / t


@pytest.mark.parametrize("bad", [dict(heads=5), dict(tp=3), dict(recompute="some"), dict(seq=30, tp=4, sp=True)])
def test_bad_configs_raise(bad):
    kw = dict(seq=64, batch=2, hidden=96, heads=8) | bad
    with pytest.raises(ConfigError):
        activation_model(MemoryConfig(**kw))
