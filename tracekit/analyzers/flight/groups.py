"""The process groups of a Flight Recorder run: who is a member of each, where that came from, which parallel
dimension each serves.

Membership, first that applies: the dumps' own ``pg_config`` (NCCL fills it; gloo on torch 2.13 leaves it
empty), ``run.json`` (tracekit's collectors list every group they create), the whole run for the default group,
else the ranks whose dumps hold an entry of the group ("observed": a member that never entered any of its
collectives cannot be seen that way, and the report says so). Dimensions come from the same rules as the Kineto
analysis (:mod:`tracekit.analyzers.comm.dimensions`: Megatron and DeviceMesh names, tracekit's own, run.json,
``--dim-map``).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from ...model.flight import FlightRun
from ..comm.dimensions import DimensionMap, parse_overrides

DEFAULT_DESCS = ("default_pg",)


@dataclass(frozen=True, slots=True)
class Group:
    name: str  # the group's name as the dumps give it (process_group[0])
    desc: str
    dimension: str
    members: tuple[int, ...]
    membership: str  # "pg_config", "run.json", "world" or "observed"

    def label(self) -> str:
        return f"{self.name} ({self.desc})" if self.desc and self.desc != self.name else self.name

    def to_dict(self) -> dict:
        return {
            "name": self.name,
            "desc": self.desc,
            "dimension": self.dimension,
            "members": list(self.members),
            "membership": self.membership,
        }


def run_groups(run: FlightRun, dim_map: Iterable[str] = ()) -> tuple[Group, ...]:
    """Every group with an entry in some dump, ordered by name (numeric names numerically). A group is known by
    its name, or its description where it has none."""
    import pandas as pd  # here: the reporters name Group (results.py) without importing pandas

    e = run.entries
    keys = np.where(e["pg_name"] != "", e["pg_name"], e["pg_desc"])  # group_key, on the arrays
    config = {pg.name: pg for d in run.dumps for pg in d.process_groups if pg.ranks}
    manifest = {pg.name: pg for pg in run.manifest_groups if pg.ranks}
    dims = DimensionMap(parse_overrides(dim_map), dict(run.group_dimensions), len(run.expected_ranks))
    frame = pd.DataFrame({"key": keys, "desc": e["pg_desc"], "rank": e["rank"]})
    frame = frame[frame["key"] != ""]
    observed_by = frame.groupby("key")["rank"].unique()
    desc_by = frame[frame["desc"] != ""].groupby("key")["desc"].agg(lambda d: d.value_counts().index[0])
    out = []
    for key in sorted(observed_by.index, key=_name_order):
        desc = str(desc_by.get(key, ""))
        observed = tuple(sorted(int(r) for r in observed_by[key]))
        if key in config:
            members, source = config[key].ranks, "pg_config"
        elif key in manifest:
            members, source = manifest[key].ranks, "run.json"
        elif desc in DEFAULT_DESCS:
            members, source = run.expected_ranks, "world"
        else:
            members, source = observed, "observed"
        members = tuple(sorted(set(members) | set(observed)))  # a rank with entries is a member whatever is said
        out.append(Group(key, desc, dims.dimension(key, desc, members), members, source))
    return tuple(out)


def _name_order(name: str) -> tuple[int, int, str]:
    return (0, int(name), "") if name.isdigit() and len(name) < 18 else (1, 0, name)
