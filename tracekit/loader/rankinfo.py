"""RankInfo of a loaded trace: rank, world, process groups, platform and the trace-format generation."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..errors import TraceFormatError
from ..model.events import EventKind as K
from ..model.events import EventTable
from ..model.traceset import ProcessGroup, RankInfo, parse_ranks
from .checks import KNOWN_CATS
from .decode import Trace
from .kinds import BY_CAT, PLATFORM_OF_GENERATION, generation_of


@dataclass
class Facts:
    """What ``rank_info`` needs from the events, gathered piece by piece while they stream past."""

    thread_names: dict = field(default_factory=dict)
    flow_cats: set = field(default_factory=set)
    first_ts: list = field(default_factory=list)  # ts of the first 1000 kept events
    msg_style: str | None = None
    begin_end: int = 0  # ph "B"/"E" events: Chrome's begin/end pairs, which tracekit does not read

    def note_kept(self, kept) -> None:
        if len(self.first_ts) < 1000:
            self.first_ts += [e.ts for e in kept[: 1000 - len(self.first_ts)]]
        if self.msg_style is None:
            for e in kept:
                a = e.args
                if a is not None:
                    if a.in_nelems is not None:
                        self.msg_style = "nelems"
                        return
                    if a.in_size is not None:
                        self.msg_style = "size"
                        return


def rank_info(trace: Trace, path: str, table: EventTable, facts: Facts, warnings) -> RankInfo:
    di = trace.distributedInfo
    given = di.rank if di is not None else None
    has_rank = given is not None
    # no distributedInfo (or no rank in it): rank 0 of a 1-rank run, in every output
    rank: int = given if given is not None else 0
    world = di.world_size if di is not None and di.world_size is not None else (-1 if has_rank else 1)
    groups = []
    pg_style = "absent"
    for pg in (di.pg_config or []) if di is not None else []:
        pg_style = "pg_desc" if pg.pg_desc is not None else ("uid" if pg.uid is not None else pg_style)
        name = pg.pg_name if pg.pg_name is not None else pg.uid
        ranks = pg.ranks if isinstance(pg.ranks, list) else list(parse_ranks(pg.ranks))
        groups.append(
            ProcessGroup(
                "" if name is None else str(name),
                pg.pg_desc or "",
                tuple(int(r) for r in ranks if isinstance(r, int)),
                int(pg.pg_size or len(ranks)),
                pg.backend_config or "",
            )
        )
    device_type, cats, evidence = _device_type(trace, table)
    if len(table) and not cats & KNOWN_CATS:  # a Kineto trace that recorded nothing still has its "Trace" span
        raise TraceFormatError(_not_kineto(path, table))
    gpus = len(trace.deviceProperties or [])
    nccl = di is not None and "nccl" in str(di.backend or "")
    if device_type == "cpu" and len(table) and (gpus or nccl):
        why = f"deviceProperties lists {gpus} GPUs" if gpus else "its backend is NCCL"
        warnings.append(
            f"{path}: {why} but the trace holds no device activity (was ProfilerActivity.CUDA "
            "recorded?); analysed as a CPU-only run, so host operators count as compute"
        )
    if "cuda_profiler_range" in cats and "kernel" not in cats:
        n = int(np.count_nonzero(table["cat_id"] == table.strings.index("cuda_profiler_range")))
        warnings.append(
            f"{path}: recorded in CUPTI range-profiler mode: its {n} device events are profiler ranges "
            "(kernels replayed to read counters), not individual kernel executions; their times are "
            "not the kernels' times, so compute, overlap and idle figures do not describe the run"
        )
    if facts.begin_end:
        warnings.append(
            f"{path}: ignored {facts.begin_end} begin/end events (ph 'B'/'E'); tracekit reads complete "
            "events (ph 'X') as Kineto writes them, so the time inside those pairs is not measured; "
            "export the trace with torch.profiler, or convert each B/E pair to one X event"
        )
    ints = [t for t in facts.first_ts if t is not None]
    flow_cats = facts.flow_cats
    generation = {
        "distributed_info": "absent"
        if di is None
        else ("pg_config" if di.pg_config else "basic") + ("+nccl_version" if di is not None and di.nccl_version else ""),
        "pg_config": pg_style,
        "msg_fields": facts.msg_style or "none",
        "flow_category": next((c for c in ("ac2g", "async_cpu_to_gpu", "async_gpu", "async") if c in flow_cats), "none"),
        "timestamps": "int" if ints and all(isinstance(t, int) for t in ints) else "float",
        "base_time": "present" if trace.baseTimeNanoseconds else "absent",
        "platform": device_type,
        "platform_evidence": evidence,
        "categories": generation_of(cats),
        "rank": "present" if has_rank else "absent",
    }
    return RankInfo(
        rank=rank,
        world_size=world,
        backend=(di.backend or "") if di is not None else "",
        source=path,
        process_groups=tuple(groups),
        device_type=device_type,
        device_properties=tuple(trace.deviceProperties or ()),
        base_time_ns=int(trace.baseTimeNanoseconds or 0),
        trace_id=str(trace.trace_id or ""),
        nccl_version=(di.nccl_version or "") if di is not None else "",
        host_name=str(trace.host_name or ""),
        generation=generation,
        warnings=tuple(warnings),
    )


def _device_type(trace: Trace, table: EventTable) -> tuple[str, set[str], str]:
    """("cuda" | "rocm" | "mtia" | "xpu" | "privateuse1" | "musa" | "mlu" | "cpu", the categories present, the
    evidence that decided, in words), from the strongest evidence there is: no device activity (cpu); the
    categories of the device events and their launches (MTIA's ``mtia_ccp_events``, XPU's ``xpu_runtime``);
    the library versions Kineto wrote in the header (``roctracer_version``/``hip_*`` vs ``cupti_version``/
    ``cuda_*``); the runtime calls (``hipLaunchKernel`` vs ``cudaLaunchKernel``: ROCm traces file them under
    ``cuda_runtime`` too); the device properties (a ``gfx`` architecture, an AMD or NVIDIA name); the kernel
    names (``hip``, ``rccl``); else CUDA, said so."""
    cats = {table.strings[c] for c in np.unique(table["cat_id"]).tolist() if 0 <= c < len(table.strings)}
    dev_mask = table.mask_kind(K.KERNEL, K.COMM, K.MEMCPY, K.MEMSET) & (table["device"] >= 0)
    if not dev_mask.any():
        return "cpu", cats, "no device activity (kernels, copies, sets) in the trace"
    by_cat = sorted({c for c in cats if c in BY_CAT and BY_CAT[c].generation in PLATFORM_OF_GENERATION})
    if by_cat:
        platforms = sorted({PLATFORM_OF_GENERATION[BY_CAT[c].generation] for c in by_cat})
        return "+".join(platforms), cats, f"event categories {', '.join(by_cat[:4])}"
    for found in (_from_versions(trace), _from_runtime(table), _from_properties(trace), _from_kernels(table)):
        if found is not None:
            return found[0], cats, found[1]
    return "cuda", cats, "no platform evidence (no version metadata, runtime call or device property says): CUDA assumed"


_ROCM_VERSIONS = ("roctracer_version", "hip_runtime_version", "hip_driver_version")
_CUDA_VERSIONS = ("cupti_version", "cuda_runtime_version", "cuda_driver_version")


def _from_versions(trace: Trace) -> tuple[str, str] | None:
    v = trace.versions or {}
    for platform, keys in (("rocm", _ROCM_VERSIONS), ("cuda", _CUDA_VERSIONS)):
        key = next((k for k in keys if k in v), None)
        if key is not None:
            return platform, f"header {key} {v[key]}"
    return None


def _from_runtime(table: EventTable) -> tuple[str, str] | None:
    """hip* against cuda*/cu* runtime and driver calls, by count; the most frequent call names the evidence."""
    rt = table["name_id"][table.mask_kind(K.RUNTIME)]
    if not len(rt):
        return None
    ids, counts = np.unique(rt, return_counts=True)
    total = {"rocm": 0, "cuda": 0}
    top: dict[str, tuple[int, str]] = {}
    for i, n in zip(ids.tolist(), counts.tolist()):
        name = table.strings[i] if 0 <= i < len(table.strings) else ""
        platform = "rocm" if name.startswith("hip") else "cuda" if name.startswith("cu") else None
        if platform is not None:
            total[platform] += n
            top[platform] = max(top.get(platform, (0, "")), (n, name))
    if not top:
        return None
    platform = max(top, key=lambda p: total[p])
    family = "hip*" if platform == "rocm" else "cuda*/cu*"
    return platform, f"runtime calls ({total[platform]} {family} calls, most often {top[platform][1]})"


def _from_properties(trace: Trace) -> tuple[str, str] | None:
    for p in trace.deviceProperties or []:
        arch = " ".join(str(p.get(k, "")) for k in ("gcnArchName", "computeMajor", "arch"))
        name = str(p.get("name", ""))
        if "gfx" in arch or any(w in name for w in ("AMD", "Radeon", "Instinct")):
            return "rocm", f"deviceProperties {'gcnArchName ' + arch.strip() if 'gfx' in arch else 'name ' + repr(name)}"
        if "NVIDIA" in name or "Tesla" in name or "GeForce" in name:
            return "cuda", f"deviceProperties name {name!r}"
    return None


def _from_kernels(table: EventTable) -> tuple[str, str] | None:
    names = table.decode("name_id")[table.mask_kind(K.KERNEL, K.COMM)]
    hit = next((n for n in names[:2000] if isinstance(n, str) and ("hip" in n.lower() or "rccl" in n.lower())), None)
    return ("rocm", f"kernel name {hit[:60]!r}") if hit else None


def _not_kineto(path: str, table: EventTable) -> str:
    """A Chrome trace whose events carry none of the categories PyTorch's profiler writes (a JAX/XLA or
    TensorFlow trace-viewer export, a Perfetto or Nsight conversion, events without ``cat``): nothing in it could
    be told apart as a kernel, an operator or a step, so every figure would be 0 and every budget would pass."""
    codes, counts = np.unique(table["cat_id"], return_counts=True)
    top = sorted(zip(counts.tolist(), codes.tolist()), reverse=True)[:3]
    names = [table.strings[c] if 0 <= c < len(table.strings) else "" for _, c in top]
    seen = ", ".join(f"{repr(name) if name else 'none'} ×{n}" for name, (n, _) in zip(names, top))
    return (
        f"{path}: none of its {len(table)} events is in a category PyTorch's profiler writes (cat: {seen}); "
        "not a PyTorch profiler (Kineto) trace -- a JAX/XLA, Perfetto or other Chrome trace? Record the run with "
        "torch.profiler and export_chrome_trace"
    )
