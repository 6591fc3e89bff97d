"""A small writer of Nsight Systems SQLite exports with the real schema, for tests and the benchmark.

The DDL of the activity and target-info tables is taken from a real export (``tests/data/nsys``'s nsys 2026.1 /
schema 3.24.14 file, read from its ``sqlite_master``), so the tables and columns are exactly what nsys writes;
``NVTX_EVENTS`` is the real 2022.2 table plus ``binaryData``, and the NVTX payload tables follow NVIDIA's NVTX
payload extension (schema id, entry offsets) -- no public export with NCCL payloads exists to copy them from.
Serialized ids as nsys writes them: ``globalPid = host << 56 | pid << 24``, ``globalTid = globalPid | tid``.
"""

from __future__ import annotations

import os
import sqlite3
import struct
from collections.abc import Iterable, Sequence

from tests.helpers.data import DATA

REAL = DATA / "nsys" / "nsysai-mock-1gpu-rtx3080-nsys2026.sqlite"
_FROM_REAL = (
    "CUPTI_ACTIVITY_KIND_KERNEL",
    "CUPTI_ACTIVITY_KIND_RUNTIME",
    "CUPTI_ACTIVITY_KIND_MEMCPY",
    "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION",
    "StringIds",
    "ThreadNames",
    "PROCESSES",
    "TARGET_INFO_GPU",
    "TARGET_INFO_SESSION_START_TIME",
    "TARGET_INFO_SYSTEM_ENV",
    "META_DATA_EXPORT",
    "META_DATA_CAPTURE",
)
NVTX_DDL = """CREATE TABLE NVTX_EVENTS (start INTEGER NOT NULL, end INTEGER, eventType INTEGER NOT NULL, rangeId INTEGER,
category INTEGER, color INTEGER, text TEXT, globalTid INTEGER, endGlobalTid INTEGER, textId INTEGER, domainId INTEGER,
uint64Value INTEGER, int64Value INTEGER, doubleValue REAL, uint32Value INTEGER, int32Value INTEGER, floatValue REAL,
jsonTextId INTEGER, jsonText TEXT, binaryData BLOB)"""
PAYLOAD_DDL = (
    "CREATE TABLE NVTX_PAYLOAD_SCHEMAS (domainId INTEGER, schemaId INTEGER, name TEXT, type INTEGER, flags INTEGER, "
    "numEntries INTEGER, payloadSize INTEGER, alignTo INTEGER)",
    "CREATE TABLE NVTX_PAYLOAD_SCHEMA_ENTRIES (domainId INTEGER NOT NULL, schemaId INTEGER NOT NULL, idx INTEGER NOT NULL, "
    "flags INTEGER, type INTEGER, name TEXT, description TEXT, arrayOrUnionDetail INTEGER, offset INTEGER)",
)
PUSH_POP, DOMAIN_CREATE = 59, 75
# NCCL's payload schemas (src/include/nvtx_payload_schemas.h): static ids from 1 << 24, entries (name, type, offset)
U64, SIZE, INT, REDOP = 18, 22, 5, (1 << 24) + 11
SCHEMAS = {
    "ncclCommInitRank": (
        (1 << 24) + 0,
        [("NCCL communicator ID", U64, 0), ("No. of ranks", INT, 8), ("Rank", INT, 12), ("CUDA device", INT, 16)],
        24,
    ),
    "ncclAllReduce": (
        (1 << 24) + 5,
        [("NCCL communicator ID", U64, 0), ("Message size [bytes]", SIZE, 8), ("Reduction operation", REDOP, 16)],
        24,
    ),
    "ncclAllGather": ((1 << 24) + 4, [("NCCL communicator ID", U64, 0), ("Message size [bytes]", SIZE, 8)], 16),
    "ncclReduceScatter": (
        (1 << 24) + 7,
        [("NCCL communicator ID", U64, 0), ("Message size [bytes]", SIZE, 8), ("Reduction operation", REDOP, 16)],
        24,
    ),
    "ncclSend": (
        (1 << 24) + 9,
        [("NCCL communicator ID", U64, 0), ("Message size [bytes]", SIZE, 8), ("Peer rank", INT, 16)],
        24,
    ),
    "ncclRecv": (
        (1 << 24) + 10,
        [("NCCL communicator ID", U64, 0), ("Message size [bytes]", SIZE, 8), ("Peer rank", INT, 16)],
        24,
    ),
}


def global_pid(pid: int, host: int = 1) -> int:
    return (host << 56) | (pid << 24)


class ExportWriter:
    """Rows go in with ``add_*``; ``close()`` commits. Strings are interned into StringIds as nsys does."""

    def __init__(
        self, path: str | os.PathLike, *, session_start_ns: int | None = 1_700_000_000_000_000_000, env=None, host="node0"
    ):
        if os.path.exists(path):
            os.remove(path)
        self.db = sqlite3.connect(os.fspath(path))
        self.db.execute("PRAGMA journal_mode=OFF")
        self.db.execute("PRAGMA synchronous=OFF")
        real = sqlite3.connect(f"file:{REAL}?mode=ro", uri=True)
        for (sql,) in real.execute(
            "SELECT sql FROM sqlite_master WHERE type='table' AND name IN ({})".format(",".join("?" * len(_FROM_REAL))),
            _FROM_REAL,
        ):
            if "TARGET_INFO_SESSION_START_TIME" in sql and session_start_ns is None:
                continue
            self.db.execute(sql)
        real.close()
        self.db.execute(NVTX_DDL)
        for ddl in PAYLOAD_DDL:
            self.db.execute(ddl)
        self.strings: dict[str, int] = {}
        self.schemas_done: set[tuple[int, int]] = set()
        if session_start_ns is not None:
            self.db.execute("INSERT INTO TARGET_INFO_SESSION_START_TIME VALUES (?, '', '', 0)", (session_start_ns,))
        self.db.executemany(
            "INSERT INTO META_DATA_EXPORT VALUES (?, ?)",
            [("EXPORT_PRODUCT_VERSION", "2026.1.1.204"), ("EXPORT_SCHEMA_VERSION", "3.24.14")],
        )
        self.db.execute("INSERT INTO TARGET_INFO_SYSTEM_ENV VALUES (0, 'Default', 'Hostname', 0, ?)", (host,))
        for name, value in (env or {}).items():
            self.db.execute("INSERT INTO META_DATA_CAPTURE VALUES ('PROCESS_0:ENVIRONMENT_VARIABLE', ?)", (f'{name}="{value}"',))

    def string(self, text: str) -> int:
        if text not in self.strings:
            self.strings[text] = len(self.strings) + 1
            self.db.execute("INSERT INTO StringIds VALUES (?, ?)", (self.strings[text], text))
        return self.strings[text]

    def add_process(self, pid: int, name: str, host: int = 1) -> int:
        self.db.execute("INSERT INTO PROCESSES VALUES (?, ?, ?)", (global_pid(pid, host), pid, name))
        return global_pid(pid, host)

    def add_gpu(self, device: int, name: str = "NVIDIA H100 80GB HBM3") -> None:
        self.db.execute(
            "INSERT INTO TARGET_INFO_GPU (vmId, id, name, totalMemory, smCount) VALUES (0, ?, ?, ?, 132)",
            (device, name, 80 << 30),
        )

    def add_kernels(self, rows: Iterable[Sequence]) -> None:
        """(start, end, device, stream, correlation, globalPid, name)"""
        self.db.executemany(
            "INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL (start, end, deviceId, contextId, streamId, correlationId, globalPid, "
            "demangledName, shortName, registersPerThread, gridX, gridY, gridZ, blockX, blockY, blockZ, staticSharedMemory, "
            "dynamicSharedMemory, localMemoryPerThread, localMemoryTotal, gridId) "
            "VALUES (?, ?, ?, 1, ?, ?, ?, ?, ?, 32, 1, 1, 1, 128, 1, 1, 0, 0, 0, 0, 0)",
            ((s, e, d, st, c, g, self.string(n), self.string(n.split("<")[0].split("(")[0])) for s, e, d, st, c, g, n in rows),
        )

    def add_runtime(self, rows: Iterable[Sequence]) -> None:
        """(start, end, globalTid, correlation, name[, eventClass])"""
        self.db.executemany(
            "INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME (start, end, eventClass, globalTid, correlationId, nameId, returnValue) "
            "VALUES (?, ?, ?, ?, ?, ?, 0)",
            ((r[0], r[1], r[5] if len(r) > 5 else 0, r[2], r[3], self.string(r[4])) for r in rows),
        )

    def add_memcpy(self, rows: Iterable[Sequence]) -> None:
        """(start, end, device, stream, correlation, globalPid, bytes, copyKind, srcKind, dstKind)"""
        self.db.executemany(
            "INSERT INTO CUPTI_ACTIVITY_KIND_MEMCPY (start, end, deviceId, contextId, streamId, correlationId, globalPid, bytes, "
            "copyKind, srcKind, dstKind) VALUES (?, ?, ?, 1, ?, ?, ?, ?, ?, ?, ?)",
            rows,
        )

    def add_sync(self, rows: Iterable[Sequence]) -> None:
        """(start, end, device, stream, correlation, globalPid, syncType)"""
        self.db.executemany(
            "INSERT INTO CUPTI_ACTIVITY_KIND_SYNCHRONIZATION (start, end, deviceId, contextId, streamId, correlationId, "
            "globalPid, syncType, eventId) VALUES (?, ?, ?, 1, ?, ?, ?, ?, 0)",
            rows,
        )

    def add_domain(self, domain: int, name: str, gtid: int) -> None:
        self.db.execute(
            "INSERT INTO NVTX_EVENTS (start, eventType, text, globalTid, domainId) VALUES (0, ?, ?, ?, ?)",
            (DOMAIN_CREATE, name, gtid, domain),
        )

    def add_range(
        self, start: int, end: int, gtid: int, name: str, domain: int = 0, payload: bytes | None = None, registered=True
    ) -> None:
        text_id, text = (self.string(name), None) if registered else (None, name)
        self.db.execute(
            "INSERT INTO NVTX_EVENTS (start, end, eventType, text, globalTid, textId, domainId, binaryData) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (start, end, PUSH_POP, text, gtid, text_id, domain, payload),
        )

    def nccl_payload(self, domain: int, call: str, **values) -> bytes:
        """The binaryData of an NCCL call: the 32-byte header (domain, schema id, payload size, header size) and the
        payload laid out as NCCL's schema says; the schema is registered on first use."""
        schema_id, entries, size = SCHEMAS[call]
        if (domain, schema_id) not in self.schemas_done:
            self.schemas_done.add((domain, schema_id))
            self.db.execute(
                "INSERT INTO NVTX_PAYLOAD_SCHEMAS VALUES (?, ?, ?, 1, 0, ?, ?, 8)",
                (domain, schema_id, call[4:], len(entries), size),
            )
            self.db.executemany(
                "INSERT INTO NVTX_PAYLOAD_SCHEMA_ENTRIES VALUES (?, ?, ?, 0, ?, ?, NULL, 0, ?)",
                [(domain, schema_id, i, t, n, None if i == 0 else off) for i, (n, t, off) in enumerate(entries)],
            )
        body = bytearray(size)
        keys = {
            "NCCL communicator ID": "comm",
            "Message size [bytes]": "bytes",
            "Peer rank": "peer",
            "No. of ranks": "nranks",
            "Rank": "rank",
            "CUDA device": "device",
            "Reduction operation": "redop",
        }
        for name, typ, off in entries:
            v = int(values.get(keys[name], 0))
            if typ in (U64, SIZE):
                struct.pack_into("<Q", body, off, v)
            else:
                struct.pack_into("<i" if typ == INT else "<I", body, off, v)
        return struct.pack("<QQQQ", domain, schema_id, size, 32) + bytes(body)

    def close(self) -> None:
        self.db.commit()
        self.db.close()


NCCL_KERNEL = "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)"
GEMM = "void cutlass::Kernel2<cutlass_80_tensorop_s1688gemm_128x128_32x3_nn_align4>(Params)"


def write_nccl_run(
    directory,
    *,
    ranks: int = 2,
    steps: int = 3,
    late_rank: int = 1,
    late_ns: int = 200_000,
    offsets_ns=None,
    message_bytes: int = 4 << 20,
    comm: int = 0x5EED_0000_ABCD_1234,
    env: bool = True,
) -> dict:
    """One export per rank of a data-parallel run: per step ("iteration{s}" NVTX range) a GEMM on stream 7, then an
    ncclAllReduce (NVTX range with NCCL's payload around the kernel's launch) on stream 13. Every rank's all-reduce
    kernel ends at the same true time; ``late_rank`` arrives ``late_ns`` after the others; each rank's clock runs
    ``offsets_ns[r]`` ahead (its session start is written that much later); each step ends in a stream sync.
    Returns the known answers."""
    offsets = list(offsets_ns or [0] * ranks)
    truth = {"wait_ns": {}, "transfer_ns": [], "offsets_ns": offsets, "bytes": message_bytes}
    base = 1_700_000_000_000_000_000
    paths = []
    for r in range(ranks):
        path = os.path.join(directory, f"rank{r}.sqlite")
        w = ExportWriter(path, session_start_ns=base + offsets[r], env={"RANK": r, "WORLD_SIZE": ranks} if env else None)
        pid = 4000 + r
        gpid = w.add_process(pid, "python")
        gtid = gpid | pid
        w.add_gpu(r)
        w.add_domain(1, "NCCL", gtid)
        w.add_range(
            1_000,
            90_000,
            gtid,
            "ncclCommInitRank",
            1,
            w.nccl_payload(1, "ncclCommInitRank", comm=comm, nranks=ranks, rank=r, device=r),
        )
        corr = 10
        for s in range(steps):
            t0 = 1_000_000 + s * 10_000_000
            w.add_range(t0, t0 + 9_000_000, gtid, f"iteration{s}")
            w.add_runtime([(t0 + 10_000, t0 + 20_000, gtid, corr, "cudaLaunchKernel_v7000")])
            w.add_kernels([(t0 + 30_000, t0 + 4_030_000, r, 7, corr, gpid, GEMM)])
            corr += 1
            arrive = t0 + 5_000_000 + (late_ns if r == late_rank else 0) + 1_000 * r
            end = t0 + 7_000_000
            h0 = arrive - 100_000
            w.add_range(
                h0, h0 + 50_000, gtid, "ncclAllReduce", 1, w.nccl_payload(1, "ncclAllReduce", comm=comm, bytes=message_bytes)
            )
            w.add_runtime([(h0 + 10_000, h0 + 30_000, gtid, corr, "cudaLaunchKernelExC_v11060")])
            w.add_kernels([(arrive, end, r, 13, corr, gpid, NCCL_KERNEL)])
            corr += 1
            # the step ends in a stream sync on the all-reduce's stream (the host waits for the device)
            w.add_runtime([(h0 + 60_000, end + 20_000, gtid, corr, "cudaStreamSynchronize_v3020")])
            w.add_sync([(end + 5_000, end + 15_000, r, 13, corr, gpid, 3)])
            corr += 1
            truth["wait_ns"].setdefault(r, []).append(None)
        w.close()
        paths.append(path)
    arrivals = [
        [1_000_000 + s * 10_000_000 + 5_000_000 + (late_ns if r == late_rank else 0) + 1_000 * r for r in range(ranks)]
        for s in range(steps)
    ]
    truth["wait_ns"] = {r: [max(a) - a[r] for a in arrivals] for r in range(ranks)}
    truth["transfer_ns"] = [1_000_000 + s * 10_000_000 + 7_000_000 - max(arrivals[s]) for s in range(steps)]
    truth["paths"] = paths
    return truth
