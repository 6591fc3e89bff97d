"""Expert-parallel attribution from evidence: DeepEP's kernels (dispatch, combine, notify) in traces without
process-group metadata go to dimension ``ep``, said in the warnings; every dimension that comes out ``world`` or
``unknown`` names ``--dim-map``. Two ranks loaded from hand-built Kineto traces."""

import pytest

from tests.helpers import kineto
from tracekit.analyzers import analyze
from tracekit.loader.loading import LoadOptions, load

DEEPEP = (
    ("void deep_ep::internode::cached_notify<false>(int, int, int, int, int*, int, int, int, int*, void*, int*)", 2),
    ("void deep_ep::intranode::dispatch<8, 768, 6144>(int4*, float*, long*)", 30),
    ("void deep_ep::intranode::combine<__nv_bfloat16, 8, 768, 4096>(__nv_bfloat16*, float*)", 20),
)  # fmt: skip
NCCL = "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)"


def _rank(tmp_path, rank):
    events = [kineto.STEP]
    kernels = [*DEEPEP, (NCCL, 10)]
    for i, (name, dur) in enumerate(kernels):
        corr = 50 + i
        events.append({**kineto.LAUNCH, "ts": 101 + i, "dur": 0.5, "args": {"correlation": corr}})
        events.append(kineto.kernel(name, 120 + 12 * i, dur / 10 + rank, corr=corr))
    doc = kineto.trace(events, distributedInfo={"rank": rank, "world_size": 2, "backend": "nccl"})
    return kineto.write(tmp_path, doc, name=f"r{rank}.json")


@pytest.fixture
def paths(tmp_path):
    return [_rank(tmp_path, r) for r in (0, 1)]


def _analysis(paths, dim_map=()):
    ts = load(paths, options=LoadOptions(cache=False), executor="serial")
    return analyze(ts, dim_map=dim_map).to_dict()


def test_deepep_without_groups_is_ep_and_said(paths):
    d = _analysis(paths)
    dims = {(x["dimension"], x["op"]): x["count"] for x in d["by_dimension"]}
    assert dims == {("ep", "notify"): 2, ("ep", "dispatch"): 2, ("ep", "combine"): 2, ("world", "all_reduce"): 2}
    (ep,) = [w for w in d["warnings"] if "expert-parallel" in w]
    assert "6 collectives" in ep and "deepep" in ep and "--dim-map 'deepep=DIM'" in ep
    assert "combine ×2" in ep and "dispatch ×2" in ep and "notify ×2" in ep
    (world,) = [w for w in d["warnings"] if "dimension 'world'" in w]
    assert "default_pg" in world and "--dim-map 'default_pg=DIM'" in world


def test_the_user_names_them_and_the_warnings_go(paths):
    d = _analysis(paths, dim_map=("deepep=moe_ep", "default_pg=dp"))
    assert {x["dimension"] for x in d["by_dimension"]} == {"moe_ep", "dp"}
    assert not [w for w in d["warnings"] if "--dim-map" in w]


def test_whatif_can_address_them(paths):
    """``whatif --set comm:ep=0`` re-times the DeepEP collectives (it matched nothing when they were 'world')."""
    from click.testing import CliRunner

    from tracekit.cli import cli

    res = CliRunner().invoke(cli, ["whatif", *paths, "--no-cache", "--set", "comm:ep=0", "--executor", "serial"])
    assert res.exit_code == 0, res.output
    assert "matches nothing" not in res.output
