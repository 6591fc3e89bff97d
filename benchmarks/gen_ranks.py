"""Generate a real-shaped multi-rank run (tests/helpers/multirank.py): one Kineto trace per rank of a tp × pp × dp
layout, each a copy of a real rank's steps with its own clock offset, straggler and jitter, process groups as
Megatron-Core or DeviceMesh name them and collectives matched across ranks as a real run's are.

    .venv/bin/python benchmarks/gen_ranks.py --layout 8x4x32 --out /tmp/tk-ranks/1024     # 1,024 ranks, 2.4 GB
    .venv/bin/python benchmarks/gen_ranks.py --layout 8x2x4 --out /tmp/tk-ranks/64 --naming devicemesh
"""

from __future__ import annotations

import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # the checkout: tests.helpers
from tests.helpers.multirank import ROLES, SOURCE, generate
from tests.helpers.rank_layout import Layout


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--layout", default="8x4x32", help="TPxPPxDP (world = the product), e.g. 8x2x4 for 64 ranks")
    p.add_argument("--out", required=True)
    p.add_argument("--source", default=SOURCE, help="the real rank every rank copies")
    p.add_argument("--steps", type=int, default=1, help="ProfilerSteps of the source to copy (at most its own)")
    p.add_argument("--roles", default=ROLES, help="comma list of tp, dp, ppA..ppD, one per source collective in turn")
    p.add_argument("--stragglers", type=int, default=1)
    p.add_argument("--slowdown", type=float, default=0.2, help="the stragglers' compute is this much slower")
    p.add_argument("--jitter", type=float, default=0.01, help="mean extra time, as a share of the compute before each collective")
    p.add_argument("--clock-offset-us", type=float, default=20_000.0, help="host clocks uniform in +- this")
    p.add_argument("--gpus-per-node", type=int, default=8, help="ranks that share a host clock")
    p.add_argument("--naming", choices=("megatron", "devicemesh"), default="megatron")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    a = p.parse_args()
    rec = generate(
        a.out,
        Layout.parse(a.layout),
        source=a.source,
        steps=a.steps,
        roles=a.roles,
        stragglers=a.stragglers,
        slowdown=a.slowdown,
        jitter=a.jitter,
        clock_offset_us=a.clock_offset_us,
        gpus_per_node=a.gpus_per_node,
        naming=a.naming,
        seed=a.seed,
        workers=a.workers,
    )
    print(json.dumps({k: v for k, v in rec.items() if k != "clock_offsets_us"}))


if __name__ == "__main__":
    main()
