"""The vectorised cross-rank matching against a straightforward per-instance reference, on seeded random
instance tables with mismatches (op differs, size differs, a rank twice), send/recv pairs, groups without Seq
(order matching), send_recv with and without Seq, unnamed groups and instances without a group."""

from __future__ import annotations

import random
from collections import defaultdict

import numpy as np
import pandas as pd
import pytest

from tracekit.analyzers.comm.collectives import _match

OPS = ("all_reduce", "all_gather", "all_to_all", "reduce_scatter", "send_recv")


def reference(rows: list[dict]) -> tuple[list[int], int, list[str]]:
    """Per instance, in plain Python: key, then per key the checks, then match numbers in key text order."""
    pg = [r["pg_name"] if r["pg_name"] != "" else r["pg_ranks"] for r in rows]
    by_start = sorted(range(len(rows)), key=lambda i: rows[i]["start_ns"])  # sorted() is stable
    coll = {
        i
        for i, r in enumerate(rows)
        if r["op"] not in ("send", "recv") and pg[i] != "" and r["op"] != "" and (r["op"] != "send_recv" or r["seq"] >= 0)
    }
    seq_groups = {pg[i] for i in coll} - {pg[i] for i in coll if rows[i]["seq"] < 0}
    keys: dict[int, str] = {}
    counter: dict[tuple, int] = defaultdict(int)
    for i in by_start:
        r = rows[i]
        if i in coll:
            if pg[i] in seq_groups:
                keys[i] = f"c|{pg[i]}|s|{r['seq']}"
            else:
                keys[i] = f"c|{pg[i]}|o|{counter['c', r['rank'], pg[i]]}"
                counter["c", r["rank"], pg[i]] += 1
        elif r["op"] in ("send", "recv") and pg[i] != "":
            src = r["src_rank"] if r["src_rank"] >= 0 else (r["rank"] if r["op"] == "send" else -1)
            dst = r["dst_rank"] if r["dst_rank"] >= 0 else (r["rank"] if r["op"] == "recv" else -1)
            if src >= 0 and dst >= 0:
                k = ("p", r["rank"], pg[i], src, dst)
                keys[i] = f"p|{pg[i]}|{src}|{dst}|{counter[k]}"
                counter[k] += 1
    members: dict[str, list[int]] = defaultdict(list)
    for i in sorted(keys):
        members[keys[i]].append(i)
    good, msgs, bad = [], [], 0
    for key in sorted(members):
        rs = [rows[i] for i in members[key]]
        ranks = [r["rank"] for r in rs]
        ops = sorted(r["op"] for r in rs)
        sizes = {r["bytes"] for r in rs if r["bytes"] > 0}
        dup = len(ranks) != len(set(ranks))
        op_bad = len(set(ops)) != 1 if key[0] == "c" else ops != ["recv", "send"]
        size_bad = len(sizes) > 1 and ops[0] != "all_to_all"
        if len(set(ranks)) < 2:
            continue
        if not (dup or op_bad or size_bad):
            good.append(key)
            continue
        bad += 1
        if bad <= 20:
            what = "rank appears twice" if dup else "op differs" if op_bad else "size differs"
            detail = ", ".join(f"rank {r['rank']}: {r['op']} {r['bytes']} B" for r in rs)
            msgs.append(f"collective {key.split('|', 1)[1]} not paired ({what}): {detail}")
    if bad > 20:
        msgs.append(f"... and {bad - 20} more unpaired collectives")
    number = {k: n for n, k in enumerate(good)}
    return [number.get(keys.get(i), -1) for i in range(len(rows))], len(good), msgs


def row(rank, op, pg_name, pg_ranks, seq, nbytes, start, src=-1, dst=-1) -> dict:
    return {
        "op": op,
        "pg_name": pg_name,
        "pg_desc": "",
        "pg_ranks": pg_ranks,
        "name": op,
        "dimension": "",
        "rank": rank,
        "step": 0,
        "group_size": 0,
        "seq": seq,
        "stream": 7,
        "start_ns": start,
        "end_ns": start + 10,
        "bytes": nbytes,
        "hidden_ns": 0,
        "src_rank": src,
        "dst_rank": dst,
    }


def random_table(rnd: random.Random, n_calls: int) -> list[dict]:
    groups = [
        ("pgA", "[0, 1, 2, 3]", True),
        ("pgB", "[0, 1]", False),
        ("", "[2, 3]", True),
        ("", "[1, 3]", False),
        ("", "", True),
    ]
    rows, seqs = [], defaultdict(int)
    for _ in range(n_calls):
        name, ranks_text, with_seq = rnd.choice(groups)
        ranks = [int(x) for x in ranks_text.strip("[]").split(",") if x] or [0, 1]
        start = rnd.randrange(0, 50) * 100  # repeated start times: the order of ties matters
        if rnd.random() < 0.3:  # send/recv pair, peers in the args or implied by the rank
            s, d = rnd.sample(ranks, 2)
            nbytes = rnd.choice((64, 128))
            explicit = rnd.random() < 0.5
            rows.append(row(s, "send", name, ranks_text, -1, nbytes, start, -1 if not explicit else s, d))
            recv_bytes = nbytes if rnd.random() < 0.9 else nbytes * 2
            rows.append(
                row(
                    d,
                    "recv" if rnd.random() < 0.95 else "send",
                    name,
                    ranks_text,
                    -1,
                    recv_bytes,
                    start + rnd.randrange(0, 300),
                    s,
                    -1 if not explicit else d,
                )
            )
            continue
        op = rnd.choice(OPS)
        seq = seqs[name, ranks_text] if with_seq or rnd.random() < 0.1 else -1
        seqs[name, ranks_text] += 1
        if op == "send_recv" and rnd.random() < 0.4:
            seq = -1  # a pipeline SendRecv without Seq: never matched
        nbytes = rnd.choice((0, 256, 1024))
        for r in ranks:
            if rnd.random() < 0.1:
                continue  # this rank's instance is missing (fewer than all ranks, maybe one)
            o = op if rnd.random() < 0.93 else rnd.choice(OPS)
            b = nbytes if rnd.random() < 0.9 else nbytes + 4
            rows.append(row(r, o, name, ranks_text, seq, b, start + rnd.randrange(0, 300)))
            if rnd.random() < 0.04:
                rows.append(row(r, o, name, ranks_text, seq, b, start + rnd.randrange(0, 300)))  # a rank twice
    rnd.shuffle(rows)
    return rows


def frame(rows: list[dict]) -> pd.DataFrame:
    df = pd.DataFrame(rows)
    for c in ("op", "pg_name", "pg_desc", "pg_ranks", "name", "dimension"):
        df[c] = df[c].astype(object)
    return df


@pytest.mark.parametrize("seed", range(40))
def test_matching_agrees_with_the_per_instance_reference(seed):
    rnd = random.Random(seed)
    rows = random_table(rnd, rnd.randrange(1, 120))
    match, matched, msgs = _match(frame(rows))
    want, want_matched, want_msgs = reference(rows)
    assert match.tolist() == want
    assert matched == want_matched
    assert msgs == want_msgs


@pytest.mark.slow
def test_the_random_tables_exercise_every_case():
    """The generator is not vacuous: over the seeds every kind of key and every mismatch occurs."""
    seen: set[str] = set()
    for seed in range(40):
        rnd = random.Random(seed)
        rows = random_table(rnd, rnd.randrange(1, 120))
        match, matched, msgs = _match(frame(rows))
        text = " ".join(msgs)
        seen |= {w for w in ("rank appears twice", "op differs", "size differs", "more unpaired") if w in text}
        seen |= {"c|pgA|s" for m in msgs if "pgA|s|" in m} | {"p|" for m in msgs if "send" in m}
        df = frame(rows)
        for kind, sel in (
            ("seq", df["seq"] >= 0),
            ("order", df["pg_name"] == "pgB"),
            ("p2p", df["op"].isin(["send", "recv"])),
            ("send_recv", df["op"] == "send_recv"),
            ("send_recv-no-seq", (df["op"] == "send_recv") & (df["seq"] < 0)),
        ):
            if (np.asarray(match)[sel.to_numpy()] >= 0).any() or kind == "send_recv-no-seq" and sel.any():
                seen.add(kind)
    assert seen >= {"rank appears twice", "op differs", "size differs", "seq", "order", "p2p", "send_recv", "send_recv-no-seq"}


def test_empty_and_unmatchable_tables():
    rows = [row(0, "all_reduce", "", "", 1, 8, 0), row(1, "all_reduce", "", "", 1, 8, 0)]
    match, matched, msgs = _match(frame(rows))
    assert match.tolist() == [-1, -1] and matched == 0 and msgs == []
