"""Kernel classes on the conformance table (tests/data/kernel_names/kernel_classes.tsv): every kernel name of the
traces in tests/data (the same files as ../shared/traces), plus names from the libraries the traces lack
(attention, MoE routing, FP8/FP4 GEMMs), each labelled by hand; the classifier must give every label."""

import glob
import pickle

import numpy as np
import pytest

from tests.helpers.data import DATA
from tracekit.analyzers.breakdowns.device_scope import scope
from tracekit.analyzers.breakdowns.kernel_classes import _MEMO, CLASSES, ClassRule, ClassRuleSet
from tracekit.analyzers.breakdowns.kernels import label_codes
from tracekit.loader.classify import RuleSet
from tracekit.loader.loading import LoadOptions, load
from tracekit.model.events import EventKind

TABLE = DATA / "kernel_names" / "kernel_classes.tsv"


def _table() -> list[tuple[str, str, str]]:
    rows = []
    for line in TABLE.read_text().splitlines():
        if line and not line.startswith("#"):
            label, source, name = line.split("\t")
            rows.append((label, source, name))
    return rows


ROWS = _table()


def _kind(name: str) -> int:
    return int(EventKind.COMM if RuleSet().match([name])[0] is not None else EventKind.KERNEL)


def test_the_table_is_big_enough_and_uses_every_class():
    stems = {p.name.removesuffix(".json.gz") for p in DATA.glob("*/*.json.gz")}
    assert len([r for r in ROWS if r[1] in stems]) >= 150
    assert {r[0] for r in ROWS if not r[0].startswith("comm:")} == set(CLASSES)


def test_every_name_gets_its_hand_label():
    names = [n for _, _, n in ROWS]
    got = ClassRuleSet().classify(names, [_kind(n) for n in names])
    wrong = [(label, g, name[:120]) for (label, _, name), g in zip(ROWS, got) if g != label]
    assert not wrong, "\n".join(f"want {w[0]}, got {w[1]}: {w[2]}" for w in wrong)


def test_conv_does_not_win_inside_convert():
    rms = [n for label, _, n in ROWS if "fused_add_rms_norm" in n]
    assert ClassRuleSet().classify(rms, [int(EventKind.KERNEL)]) == ["normalization"]
    names = ["void f<vllm::_typeConvert<float> >(int)", "void ns::conv2d_fprop<float>(float*)", "ImplicitGemmConvolution"]
    assert ClassRuleSet().classify(names, [int(EventKind.KERNEL)] * 3) == ["other", "convolution", "convolution"]


def test_user_rules_come_first_and_run_on_re2():
    rules = ClassRuleSet().with_rules([ClassRule(r"^volta_sgemm", "my_gemm")])
    assert rules.classify(["volta_sgemm_128x64_nn", "ampere_sgemm_32x32_sliced1x4_tn"], [int(EventKind.KERNEL)] * 2) == [
        "my_gemm",
        "gemm",
    ]


def test_a_long_name_is_classified_on_its_head_once():
    rules = ClassRuleSet().with_rules([ClassRule(r"^only_in_this_test$", "other")])  # a memo of its own
    name = "void at::native::vectorized_elementwise_kernel<4, " + "x" * (2 << 20)
    assert rules.classify([name, name], [int(EventKind.KERNEL)] * 2) == ["elementwise", "elementwise"]
    assert len(_MEMO[rules]) == 1  # worked out once per distinct (name head, kind)


def test_equal_rule_sets_share_what_they_worked_out():
    """A rank analysed in a worker gets its own unpickled copy of the rule set: equal, so it finds the classes the
    ranks before it worked out in that process."""
    rules = ClassRuleSet().with_rules([ClassRule(r"^shared_in_this_test$", "gemm")])
    assert rules.classify(["shared_in_this_test", "ampere_sgemm_32x32"], [int(EventKind.KERNEL)] * 2) == ["gemm", "gemm"]
    copy = pickle.loads(pickle.dumps(rules))
    assert copy is not rules and copy == rules and _MEMO[copy] is _MEMO[rules]
    assert len(_MEMO[rules]) == 2


TRACES = sorted(glob.glob(str(DATA / "kineto-gpu*" / "*.json.gz")) + glob.glob(str(DATA / "kineto-tb-plugin" / "*.json.gz")))


@pytest.mark.parametrize("path", TRACES, ids=lambda p: p.rsplit("/", 1)[-1])
def test_loaded_traces_give_the_table_s_labels(path):
    """End to end: each trace loaded, its device kernels' classes (the breakdown's own labels) are the table's."""
    ts = load([path], options=LoadOptions(cache=False), executor="serial")
    (rank,) = ts.ranks
    sc = scope(ts.table(rank), None, ts.info(rank))
    names, _, classes, _ = label_codes(sc.table, sc.rows, ClassRuleSet())
    want = {n: label for label, _, n in ROWS}
    kinds = sc.table["kind"][sc.rows]
    compute = set(np.unique(sc.table["name_id"][sc.rows][np.isin(kinds, [EventKind.KERNEL, EventKind.COMM])]).tolist())
    seen = {n: c for n, c in zip(names, classes) if n in want and sc.table.strings.index(n) in compute}
    assert {n: want[n] for n in seen} == seen
