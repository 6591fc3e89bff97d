"""The t sweep measured on CPU shows the paper: TP leaves 10 sbh replicated, TP + SP divides everything by t.

Also one real 2-process gloo run: a rank's saved bytes equal the single-process rank-local simulation.
"""

import pytest
import torch
import torch.multiprocessing as mp

from tests.helpers.net import free_port
from tests.helpers.sweep import measure_layer, split_replicated, sweep

S, B, H, A = 64, 2, 64, 4
SBH = S * B * H
LN_STATS = 2 * 2 * S * B * 2  # two LayerNorms x (mean, rstd) x s x b x bf16


def test_sweep_replicated_term():
    rows = sweep(S, B, H, A)
    assert all(r["measured_bytes"] == r["model_bytes"] for r in rows)
    tp = [r["measured_bytes"] for r in rows if r["mode"] == "tp"]
    sp = [r["measured_bytes"] for r in rows if r["mode"] == "tp+sp"]
    rep, shard = split_replicated(tp[0], tp[1])  # measured(t) = R + X/t, fitted on t = 1, 2
    assert rep == 10 * SBH + LN_STATS and rep + shard // 4 == tp[2]  # and it predicts t = 4
    rep_sp, shard_sp = split_replicated(sp[0], sp[1])
    assert rep_sp == 0 and shard_sp // 4 == sp[2] and shard_sp == tp[0]


def _worker(rank, world, port, sp, out):
    import torch.distributed as dist

    from tests.helpers.ref_layer import GlooComm, RefLayer
    from tracekit.collectors.activation import activation_memory

    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    try:
        torch.manual_seed(0)
        layer = RefLayer(H, A, tp=world, sp=sp, comm=GlooComm())
        g = torch.Generator().manual_seed(rank)
        x = torch.randn(S // world if sp else S, B, H, generator=g).to(torch.bfloat16).requires_grad_()
        with activation_memory(layer, layers=[layer], rank=rank, peak="none") as rec:
            layer(x).float().sum().backward()
        out[rank] = rec.result().layers[0].measured_bytes
    finally:
        dist.destroy_process_group()


@pytest.mark.slow
@pytest.mark.parametrize("sp", [False, True])
def test_real_gloo_ranks_match_the_rank_local_simulation(sp):
    ctx = mp.get_context("spawn")
    out = ctx.Manager().dict()
    mp.start_processes(_worker, args=(2, free_port(), sp, out), nprocs=2, start_method="spawn")
    assert dict(out) == {0: measure_layer(S, B, H, A, 2, sp), 1: measure_layer(S, B, H, A, 2, sp)}
