"""What an export says about its processes and its machine: the launched process's environment (the rank a
launcher gave it), the session's start on the wall clock, the host name and the GPUs.

Only these few values are read from ``TARGET_INFO_SYSTEM_ENV`` and ``META_DATA_CAPTURE``, which also hold the
recording user's paths and whole environment: nothing else from them reaches a report.
"""

from __future__ import annotations

import re

from .database import Export, int_of, text_of
from .schema import CAPTURE, GPUS, PROCESSES, SESSION

# Environment variables that give a process's rank and the world size, most specific first
RANK_VARS = ("RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "SLURM_PROCID", "LOCAL_RANK")
WORLD_VARS = ("WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_NTASKS")
_ENV = re.compile(r'^([A-Z_][A-Z0-9_]*)="?(\d{1,9})"?$')


def environment(db: Export) -> dict[int, dict[str, int]]:
    """PROCESS_<i> (as META_DATA_CAPTURE numbers the launched processes) -> the rank and world variables it had."""
    if not db.has(CAPTURE) or not {"name", "value"} <= db.columns(CAPTURE):
        return {}
    wanted = " OR ".join(f"CAST(value AS TEXT) LIKE '{v}=%'" for v in RANK_VARS + WORLD_VARS)
    rows = db.pairs(
        f"SELECT {text_of('name')}, {text_of('value')} FROM {CAPTURE} "
        f"WHERE CAST(name AS TEXT) LIKE 'PROCESS\\_%:ENVIRONMENT\\_VARIABLE' ESCAPE '\\' AND ({wanted})"
    )
    out: dict[int, dict[str, int]] = {}
    for name, value in rows:
        m, idx = _ENV.match(value.strip()), name.split(":", 1)[0].removeprefix("PROCESS_")
        if m and idx.isdigit():
            out.setdefault(int(idx), {})[m.group(1)] = int(m.group(2))
    return out


def rank_from(env: dict[str, int]) -> tuple[int, int, str]:
    """(rank, world size, the variable the rank came from); -1 and "" where the environment says nothing."""
    var = next((v for v in RANK_VARS if v in env), "")
    world = next((env[v] for v in WORLD_VARS if env.get(v, 0) > 0), -1)
    rank = env[var] if var else -1
    if world > 0 and not 0 <= rank < world:
        world = -1
    return rank, world, var


def session_start_ns(db: Export) -> int:
    """The capture's start on the UTC clock (ns): event times are relative to it. 0 when the export lacks it."""
    if not db.has(SESSION) or "utcEpochNs" not in db.columns(SESSION):
        return 0
    v = db.ints(f"SELECT {int_of('utcEpochNs')} AS t FROM {SESSION} LIMIT 1", ("t",))["t"]
    return int(v[0]) if len(v) and 0 < v[0] < 2**62 else 0


def host_name(db: Export) -> str:
    table = "TARGET_INFO_SYSTEM_ENV"
    if not db.has(table) or not {"name", "value"} <= db.columns(table):
        return ""
    names = db.texts(f"SELECT {text_of('value')} AS v FROM {table} WHERE name = 'Hostname' LIMIT 1", "v")
    return names[0][:255] if names else ""


def process_names(db: Export) -> dict[int, str]:
    """OS pid -> process name (the PROCESSES table lists every process on the node; a few are asked for)."""
    if not db.has(PROCESSES) or not {"pid", "name"} <= db.columns(PROCESSES):
        return {}
    table = db.arrow(f"SELECT {int_of('pid')} AS pid, {text_of('name')} AS name FROM {PROCESSES}")
    return {int(p): str(n)[:255] for p, n in zip(table.column("pid").to_pylist(), table.column("name").to_pylist()) if p}


def gpus(db: Export) -> dict[int, dict]:
    """Device id -> its properties, in the keys Kineto's deviceProperties uses."""
    if not db.has(GPUS) or "id" not in db.columns(GPUS):
        return {}
    have = db.columns(GPUS)
    fields = {"id": "id", "totalGlobalMem": "totalMemory", "numSms": "smCount", "computeMajor": "computeMajor"}
    fields["computeMinor"] = "computeMinor"
    ints = ", ".join(f"{int_of(col) if col in have else 'NULL'} AS {key}" for key, col in fields.items())
    name = text_of("name") if "name" in have else "''"
    table = db.arrow(f"SELECT {ints}, {name} AS name FROM {GPUS}").to_pydict()
    out = {}
    for i, dev in enumerate(table["id"]):
        if dev is None or dev < 0 or dev in out:
            continue
        props = {k: table[k][i] for k in fields if table[k][i] is not None}
        out[int(dev)] = {**props, "name": str(table["name"][i])[:255]}
    return out
