"""Markdown tables (as in docs/performance.md) from a results JSON of ``benchmarks/side_by_side.py``.

python benchmarks/tables.py benchmarks/results-2026-12-01-full.json
"""

from __future__ import annotations

import json
import sys


def _t(r: dict | None) -> str:
    if not r:
        return "—"
    if "error" in r:
        return f"({r['error']})"
    return f"{r['wall_s']:.2f} s"


def _m(r: dict | None) -> str:
    return f"{r['peak_gb'] * 1024:,.0f} MiB" if r and "peak_gb" in r else "—"


def _ratio(a: dict | None, b: dict | None, key: str = "wall_s") -> str:
    if not a or not b or "error" in a or "error" in b or not b.get(key):
        return "—"
    return f"{a[key] / b[key]:.1f}×"


def machine(doc: dict) -> str:
    m = doc["machine"]
    return (
        f"{m['date']}: {m['cpus']} CPUs ({m['cpu']}), {m['memory_gb']} GiB, Python {m['python']}, HTA "
        f"{m['HolisticTraceAnalysis']}, msgspec {m['msgspec']}, numpy {m['numpy']}, pandas {m['pandas']}, pyarrow "
        f"{m['pyarrow']}; load average {m['load_avg_at_start'][0]:.1f} at the start, {m['load_avg_at_end'][0]:.1f} "
        "at the end (2 cores shared with other jobs)"
    )


def whole(doc: dict) -> str:
    rows = [
        "| trace | events | HTA 0.5.0 load + overlap | tracekit analyze (split, 2 cores; median of 5 around "
        "HTA's run, range) | "
        "speed-up | serial | "
        "Parquet cache warm | speed-up | analysis cache warm | speed-up | HTA peak | tracekit peak | "
        "memory ratio |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for t in doc["traces"]:
        r = t["runs"]
        hta, tk, ser, cached = r.get("hta"), r["tk_analyze"], r["tk_analyze_serial"], r["tk_analyze_cached"]
        warm = r.get("tk_analyze_warm")
        mem = f"{tk['peak_gb'] / hta['peak_gb']:.2f}" if hta and "error" not in hta else "—"
        spread = (
            f" ({min(x['wall_s'] for x in tk['runs']):.2f}–{max(x['wall_s'] for x in tk['runs']):.2f})" if tk.get("runs") else ""
        )
        rows.append(
            f"| {t['size_mb']} MB | {t['trace']['events'] / 1e6:.2f} M | {_t(hta)} | {_t(tk)}{spread} | "
            f"{_ratio(hta, tk)} | {_t(ser)} ({_ratio(hta, ser)}) | {_t(cached)} | {_ratio(hta, cached)} | "
            f"{_t(warm) if warm else '—'} | {_ratio(hta, warm) if warm else '—'} | "
            f"{_m(hta)} | {_m(tk)} | {mem} |"
        )
    return "\n".join(rows)


def split(doc: dict) -> str:
    rows = [
        "| trace | serial load: wall (CPU) | split load, 2 workers: wall | pieces (MB) | CPU s per piece | scan | "
        "join | finish: wall (CPU) | expected on 2 / 8 / 16 idle cores |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for t in doc["traces"]:
        s = t["runs"].get("split") or {}
        if "piece_cpu_s" not in s:
            continue
        cpu = s["piece_cpu_s"]
        serial_part = s["scan_s"] + s["absorb_s"] + s["finish_cpu_s"]  # CPU: what an idle core would take
        expect = " / ".join(f"{serial_part + sum(cpu) / n:.2f}" for n in (2, 8, 16))
        rows.append(
            f"| {t['size_mb']} MB | {s['serial']['wall_s']:.2f} s ({s['serial']['cpu_s']:.2f} s) | "
            f"{s['split_wall_s']:.2f} s | {', '.join(f'{b / 1e6:.0f}' for b in s['piece_bytes'])} | "
            f"{', '.join(f'{c:.2f}' for c in cpu)} | {s['scan_s'] * 1e3:.0f} ms | {s['absorb_s'] * 1e3:.0f} ms | "
            f"{s['finish_s']:.2f} s ({s['finish_cpu_s']:.2f} s) | {expect} s |"
        )
    return "\n".join(rows)


def startup(doc: dict) -> str:
    s = doc["startup"]
    return (
        f"bare `python -c pass` {s['py_start']['min_wall_s']:.2f} s; `python -c 'import tracekit'` "
        f"{s['tk_import']['min_wall_s']:.2f} s; `tracekit --help` {s['tk_help']['min_wall_s']:.2f} s (min of 3)"
    )


def extras(doc: dict) -> str:
    out = []
    if "streaming_1500mb" in doc:
        r = doc["streaming_1500mb"]["runs"]
        out.append(
            f"- 1.5 GB ({doc['streaming_1500mb']['trace']['events'] / 1e6:.1f} M events): analyze split "
            f"{_t(r['tk_analyze'])}, {_m(r['tk_analyze'])} (all processes); serial {_t(r['tk_analyze_serial'])}, "
            f"{_m(r['tk_analyze_serial'])}; warm cache {_t(r['tk_analyze_cached'])}"
        )
    if "bounded_5m" in doc:
        b = doc["bounded_5m"]
        a, rep = b["runs"]["tk_analyze"], b["runs"]["tk_report"]
        out.append(
            f"- 5 M events ({b['trace']['events'] / 1e6:.2f} M, {b['trace']['collectives'] / 1e6:.2f} M collective "
            f"instances): `analyze --format json --collectives-out` {_t(a)}, {_m(a)}, summary "
            f"{(a.get('summary_bytes') or 0) / 1e6:.1f} MB, Parquet {(a.get('parquet_bytes') or 0) / 1e6:.1f} MB; "
            f"`report` {_t(rep)}, {_m(rep)}, HTML {(rep.get('html_bytes') or 0) / 1e6:.1f} MB"
        )
    if "ranks_64" in doc:
        k = doc["ranks_64"]
        r = k["runs"]
        out.append(
            f"- 64 ranks ({k['trace']['bytes'] / 1e9:.2f} GB, {k['trace']['events'] / 1e6:.1f} M events): tracekit "
            f"{_t(r['tk_analyze'])}, {_m(r['tk_analyze'])}; HTA 0.5.0 {_t(r.get('hta'))}, {_m(r.get('hta'))}"
        )
    return "\n".join(out)


def main() -> None:
    with open(sys.argv[1]) as fh:
        doc = json.load(fh)
    print(machine(doc), "", whole(doc), "", split(doc), "", startup(doc), "", extras(doc), sep="\n")


if __name__ == "__main__":
    main()
