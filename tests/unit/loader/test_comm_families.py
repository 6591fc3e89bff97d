"""Every communication family of loader/comm_families.py on real kernel names (as each library's sources make
them, demangled the way CUPTI/roctracer write them), with the op each must carry, loaded end to end from a
trace; local compute beside those libraries stays compute; a kernel launched from inside a collective host op is
communication whatever its name."""

import pytest

from tests.helpers import kineto
from tests.helpers.data import DATA
from tracekit.loader.classify import RuleSet
from tracekit.model.events import EventKind as K


def _table() -> tuple[dict[str, list[tuple[str, str]]], list[str]]:
    """tests/data/kernel_names/comm_families.tsv: family, op ("-": none), name; family "compute" = not comm."""
    families: dict[str, list[tuple[str, str]]] = {}
    for line in (DATA / "kernel_names" / "comm_families.tsv").read_text().splitlines():
        if line and not line.startswith("#"):
            family, op, name = line.split("\t")
            families.setdefault(family, []).append((name, "" if op == "-" else op))
    return families, [n for n, _ in families.pop("compute")]


FAMILY_NAMES, NOT_COMM = _table()


def _trace(names, host=None):
    """One step; per name a launch (on the step's thread, inside ``host`` when given) and its kernel."""
    events = [kineto.STEP]
    if host is not None:
        events.append({"ph": "X", "cat": "cpu_op", "name": host, "pid": 1, "tid": 1, "ts": 101, "dur": 98})
    for i, name in enumerate(names):
        corr = 1000 + i
        events.append({**kineto.LAUNCH, "ts": 102 + i * 0.01, "dur": 0.005, "args": {"correlation": corr}})
        events.append(kineto.kernel(name, 120 + i * 0.1, 0.05, corr=corr))
    return kineto.trace(events)


def _kinds_and_ops(tmp_path, names, host=None):
    table, _ = kineto.load(kineto.write(tmp_path, _trace(names, host)))
    rows = {table.string(int(c)): i for i, c in enumerate(table["name_id"]) if table["kind"][i] in (K.KERNEL, K.COMM)}
    kind = table["kind"]
    return {n: (int(kind[i]), table.string(int(table["coll_op_id"][i])) or "") for n, i in rows.items()}


@pytest.mark.parametrize("family", sorted(FAMILY_NAMES))
def test_each_family_is_communication_with_its_op(tmp_path, family):
    names = [n for n, _ in FAMILY_NAMES[family]]
    got = _kinds_and_ops(tmp_path, names)
    assert {n: got[n] for n in names} == {n: (int(K.COMM), op) for n, op in FAMILY_NAMES[family]}
    libraries = {r.library if r else None for r in RuleSet().match(names)}
    assert libraries == {family}


def test_local_compute_beside_the_libraries_stays_compute(tmp_path):
    got = _kinds_and_ops(tmp_path, NOT_COMM)
    assert {n: got[n][0] for n in NOT_COMM} == {n: int(K.KERNEL) for n in NOT_COMM}
    assert RuleSet().match(NOT_COMM) == [None] * len(NOT_COMM)


@pytest.mark.parametrize(
    "host, comm",
    [
        ("symm_mem::one_shot_all_reduce", True),
        ("symm_mem::multimem_all_reduce_", True),
        ("_C_custom_ar::all_reduce", True),
        ("nccl:all_reduce", True),
        ("symm_mem::fused_all_gather_matmul", False),  # its GEMMs are compute
        ("aten::mm", False),
    ],
)
def test_a_kernel_launched_inside_a_collective_op_is_communication_whatever_its_name(tmp_path, host, comm):
    name = "void my_lib::mystery_kernel<float, 8>(float*, int)"
    (kind, _) = _kinds_and_ops(tmp_path, [name], host=host)[name]
    assert kind == (int(K.COMM) if comm else int(K.KERNEL))


def test_a_name_longer_than_the_bound_is_classified_on_its_first_characters():
    from tracekit.loader.patterns import MAX_MATCH_CHARS

    head = "void deep_ep::intranode::dispatch<8, 768, 6144>("
    long_name = head + "int*, " * (MAX_MATCH_CHARS // 3)
    late = "x" * (MAX_MATCH_CHARS + 10) + " ncclDevKernel_AllGather_RING_LL"
    (a, b) = RuleSet().match([long_name, late])
    assert a is not None and a.library == "deepep" and b is None
