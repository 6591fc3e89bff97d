"""The ep workload's pieces on hand-built inputs: routing ties and capacity order, the ep/edp groups of a
layout, its degrees and their one-line errors, the CLI's help and usage errors."""

from __future__ import annotations

import pytest
import torch
from click.testing import CliRunner

from tracekit.cli import cli
from tracekit.collectors.layout import group_ranks
from tracekit.collectors.workloads.config import WorkloadConfig
from tracekit.collectors.workloads.moe import MoEParallel, make_plan, route
from tracekit.errors import ConfigError
from tracekit.model.layout import ParallelLayout


def test_ties_go_to_the_lower_expert_index():
    router = torch.tensor([[1.0, 0.0], [1.0, 0.0], [0.0, 1.0]])  # experts 0 and 1 see the same logit
    experts, gates, keep, _ = route(torch.tensor([[1.0, 0.0], [0.0, 1.0]]), router, 2, 10.0)
    assert experts.tolist() == [[0, 1], [2, 0]]
    assert keep.all() and torch.allclose(gates[0, 0], gates[0, 1])


def test_capacity_fills_first_choices_before_second_choices():
    # token 0 prefers expert 0 then 1, token 1 expert 1 then 0; capacity ceil(0.5 * 2 * 2 / 2) = 1 per expert:
    # both first choices are kept, both second choices dropped (token order alone would keep token 0's two)
    router = torch.eye(2)
    experts, _, keep, capacity = route(torch.tensor([[2.0, 0.0], [0.0, 2.0]]), router, 2, 0.5)
    assert capacity == 1 and experts.tolist() == [[0, 1], [1, 0]]
    assert keep.tolist() == [[True, False], [True, False]]


def test_plan_sends_rows_by_chunk_then_expert_then_priority():
    experts = torch.tensor([[1, 0], [0, 1], [1, 0], [0, 1]])  # 4 tokens, k = 2, all kept
    keep = torch.ones(4, 2, dtype=torch.bool)
    plan = make_plan(experts, keep, MoEParallel(experts=2, chunks=2), log=None)
    assert plan.chunk_rows == [4, 4]
    # chunk 0 = tokens 0, 1: expert 0 gets token 1 (first choice) then token 0 (second); expert 1 token 0, token 1
    assert plan.row_token.tolist() == [1, 0, 0, 1, 3, 2, 2, 3]
    assert plan.row_choice.tolist() == [2, 1, 0, 3, 6, 5, 4, 7]
    assert plan.in_splits == [[4], [4]] == plan.out_splits
    assert [r.tolist() for r in plan.expert_rows[0]] == [[0, 1], [2, 3]]  # received rows of local experts 0, 1


def test_ep_and_expert_data_parallel_groups():
    lay = ParallelLayout(dp=4, ep=2)
    assert group_ranks(lay, "ep") == [[0, 1], [2, 3]]
    assert group_ranks(lay, "edp") == [[0, 2], [1, 3]]
    lay = ParallelLayout(tp=2, dp=2, ep=2)  # tp innermost: an ep group holds one tp index
    assert group_ranks(lay, "ep") == [[0, 2], [1, 3]]
    assert group_ranks(ParallelLayout(cp=2, ep=2), "ep") == [[0, 1]]


@pytest.mark.parametrize(
    ("kw", "want"),
    [
        ({"workload": "ep"}, dict(dp=2, ep=2, world_size=2)),
        ({"workload": "ep", "ep": 4, "batch": 4}, dict(dp=4, ep=4, world_size=4)),
        ({"workload": "cp-ring+ep"}, dict(dp=1, cp=2, ep=2, world_size=2)),
        ({"workload": "tp-sp+ep"}, dict(tp=2, dp=2, ep=2, world_size=4)),
        ({"workload": "dp+ep", "dp": 4, "batch": 4}, dict(dp=4, ep=2, world_size=4)),
    ],
)
def test_degrees(kw, want):
    lay = WorkloadConfig(**kw).validate()
    assert {k: lay[k] for k in want} == want


@pytest.mark.parametrize(
    ("kw", "message"),
    [
        ({"workload": "dp", "ep": 2}, "needs the ep workload"),
        ({"workload": "pp+ep"}, "not built"),
        ({"workload": "ep", "ep": 3, "dp": 2}, "must divide dp x cp"),
        ({"workload": "ep", "experts": 3}, "--experts 3 must divide by --ep 2"),
        ({"workload": "ep", "top_k": 5}, "--top-k 5"),
        ({"workload": "ep", "capacity_factor": 0.0}, "--capacity-factor"),
    ],
)
def test_bad_degrees_are_one_line_config_errors(kw, message):
    with pytest.raises(ConfigError, match=message) as info:
        WorkloadConfig(**kw).validate()
    assert "\n" not in str(info.value)


def test_cli_lists_ep_and_refuses_a_bad_ep(tmp_path):
    help_text = CliRunner().invoke(cli, ["run", "--help"]).output
    assert "ep       mixture of experts" in help_text and "--experts" in help_text
    result = CliRunner().invoke(cli, ["run", "--workload", "ep", "--experts", "3", "--out", str(tmp_path)])
    assert result.exit_code == 2 and "--experts 3" in result.output
