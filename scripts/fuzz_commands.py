"""Mutation fuzzer over the commands: mutate the small real traces of tests/data (fields set to hostile values,
events duplicated, removed, times swapped, header fields replaced), run every trace-reading command on each in
this process, and report each run the hostile campaign's judge calls a defect (a traceback, a hang, exit 1 from a
command without a gate, an exit code outside 0/2/3, no one-line error).

    .venv/bin/python scripts/fuzz_commands.py [SEED] [CASES] [--keep DIR]

Adapted from the session's ad-hoc fuzzer (notes/fuzz/fuzz.py): the same mutations, the campaign's WEIRD values,
more commands (check, baseline, diff, whatif), and the campaign's verdicts instead of "any non-SystemExit".
"""

from __future__ import annotations

import argparse
import copy
import gzip
import json
import random
import sys
import tempfile
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.hostile.campaign import WEIRD, Case, run_case  # noqa: E402

DATA = ROOT / "tests" / "data"


def mutate(doc: dict, rng: random.Random) -> dict:
    evs = doc.get("traceEvents", [])
    for _ in range(rng.randint(1, 6)):
        if not evs:
            break
        e = rng.choice(evs)
        if not isinstance(e, dict):
            continue
        kind = rng.random()
        if kind < 0.5:
            k = rng.choice([*e.keys(), "ts", "dur", "pid", "tid", "ph", "cat", "name", "args", "id"])
            e[k] = rng.choice(WEIRD)
        elif kind < 0.7 and isinstance(e.get("args"), dict) and e["args"]:
            e["args"][rng.choice(list(e["args"]))] = rng.choice(WEIRD)
        elif kind < 0.8:
            evs.append(copy.deepcopy(e))
        elif kind < 0.9:
            evs.remove(e)
        else:
            e2 = rng.choice(evs)
            if isinstance(e2, dict) and "ts" in e2 and "ts" in e:
                e["ts"], e2["ts"] = e2["ts"], e["ts"]
    if rng.random() < 0.3:
        di = doc.setdefault("distributedInfo", {})
        if isinstance(di, dict):
            di[rng.choice(["rank", "world_size", "pg_config", "backend", "nccl_version"])] = rng.choice(WEIRD)
    if rng.random() < 0.1:
        doc[rng.choice(["baseTimeNanoseconds", "deviceProperties", "schemaVersion", "traceName"])] = rng.choice(WEIRD)
    return doc


def commands(f: Path, out: Path) -> list[list[str]]:
    s = ["--no-cache", "--executor", "serial"]
    return [
        ["analyze", str(f), "--format", "json", *s],
        ["analyze", str(f), "--critical-path", "--format", "json", *s],
        ["whatif", str(f), "--set", "comm:tp=0", *s],
        ["info", str(f), *s],
        ["report", str(f), "-o", str(out / "r.html"), *s],
        ["annotate", str(f), "-o", str(out / "a.json.gz"), *s],
        ["baseline", str(f), "-o", str(out / "b.json"), *s],
        ["check", str(f), "--budget", "exposed_comm_share<=1", *s],
    ]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("seed", nargs="?", type=int, default=0)
    ap.add_argument("cases", nargs="?", type=int, default=30)
    ap.add_argument("--keep", type=Path, default=None, help="copy each failing input here")
    args = ap.parse_args()
    rng = random.Random(args.seed)
    traces = sorted(p for p in DATA.rglob("*.json.gz") if p.stat().st_size < 600_000)
    tmp = Path(tempfile.mkdtemp())
    (tmp / "cache").mkdir()
    runs, verdicts = 0, Counter()
    for i in range(args.cases):
        src = rng.choice(traces)
        doc = mutate(json.loads(gzip.decompress(src.read_bytes())), rng)
        f = tmp / f"case{i}.json"
        f.write_text(json.dumps(doc))
        for argv in commands(f, tmp):
            o = run_case(Case(f"{src.name}#{i}", "fuzz", argv, (0, 1, 2, 3) if argv[0] == "check" else (0, 2, 3)), tmp / "cache")
            runs += 1
            verdicts[o.defect or f"exit {o.rc}"] += 1
            if o.defect:
                print(f"=== {src.name} case{i} {' '.join(argv[:1])}: {o.defect}\n{o.stderr[-1500:]}", flush=True)
                if args.keep:
                    args.keep.mkdir(parents=True, exist_ok=True)
                    (args.keep / f"{args.seed}-{i}-{src.stem}").write_text(f.read_text())
    print(json.dumps({"runs": runs, "outcomes": dict(verdicts)}))
    return 1 if any(k not in ("exit 0", "exit 1", "exit 2", "exit 3") for k in verdicts) else 0


if __name__ == "__main__":
    sys.exit(main())
