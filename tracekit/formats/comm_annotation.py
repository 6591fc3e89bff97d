"""The text of tracekit's own ``record_function`` annotations, written by the collectors and read by the loader.

gloo emits no ``record_param_comms`` and ``record_function`` arguments are not exported to Kineto traces, so
the collective's metadata travels in the annotation's name::

    tracekit:comm|op=all_gather|pg=1|desc=tracekit:tp|ranks=0,1|dtype=bfloat16|in=1024|out=2048|inb=2048|outb=4096|seq=3
    tracekit:wait|op=all_gather|pg=1|seq=3

``comm`` wraps the call that issues the collective, ``wait`` wraps ``Work.wait()`` (time the host is blocked).
Optional keys: ``src``/``dst`` (point-to-point peers, global ranks), ``insplit``/``outsplit`` (all-to-all split
sizes, comma-separated). Values never contain ``|`` or ``=``.
"""

from __future__ import annotations

from dataclasses import dataclass

COMM_PREFIX = "tracekit:comm|"
WAIT_PREFIX = "tracekit:wait|"

_INT_KEYS = {
    "in": "in_nelems",
    "out": "out_nelems",
    "inb": "in_bytes",
    "outb": "out_bytes",
    "seq": "seq",
    "src": "src_rank",
    "dst": "dst_rank",
}
_STR_KEYS = {
    "op": "op",
    "pg": "pg_name",
    "desc": "pg_desc",
    "ranks": "ranks",
    "dtype": "dtype",
    "insplit": "in_split",
    "outsplit": "out_split",
}


@dataclass(frozen=True, slots=True)
class CommAnnotation:
    op: str
    pg_name: str = ""
    pg_desc: str = ""
    ranks: str = ""  # comma-separated global ranks
    dtype: str = ""
    in_nelems: int = -1
    out_nelems: int = -1
    in_bytes: int = -1
    out_bytes: int = -1
    seq: int = -1
    src_rank: int = -1
    dst_rank: int = -1
    in_split: str = ""
    out_split: str = ""
    is_wait: bool = False

    def format(self) -> str:
        """The annotation name for this collective (``tracekit:comm|...`` or ``tracekit:wait|...``)."""
        parts = [f"op={self.op}", f"pg={self.pg_name}"]
        if self.is_wait:
            parts.append(f"seq={self.seq}")
            return WAIT_PREFIX + "|".join(parts)
        for key, attr in _STR_KEYS.items():
            value = getattr(self, attr)
            if key not in ("op", "pg") and value:
                parts.append(f"{key}={_clean(value)}")
        for key, attr in _INT_KEYS.items():
            value = getattr(self, attr)
            if value >= 0:
                parts.append(f"{key}={int(value)}")
        return COMM_PREFIX + "|".join(parts)

    @property
    def ranks_tuple(self) -> tuple[int, ...]:
        return tuple(int(r) for r in self.ranks.split(",") if r.strip())


def _clean(value: str) -> str:
    return str(value).replace("|", "/").replace("=", ":")


def parse(name: str) -> CommAnnotation | None:
    """The annotation encoded in ``name``, or None if ``name`` is not a tracekit comm/wait annotation.
    Malformed fields are skipped, never raised: a trace is untrusted input."""
    if name.startswith(COMM_PREFIX):
        body, is_wait = name[len(COMM_PREFIX) :], False
    elif name.startswith(WAIT_PREFIX):
        body, is_wait = name[len(WAIT_PREFIX) :], True
    else:
        return None
    fields: dict[str, object] = {"is_wait": is_wait}
    for part in body.split("|"):
        key, sep, value = part.partition("=")
        if not sep:
            continue
        if key in _STR_KEYS:
            fields[_STR_KEYS[key]] = value
        elif key in _INT_KEYS:
            try:
                fields[_INT_KEYS[key]] = int(value)
            except ValueError:
                continue
    if "op" not in fields:
        return None
    return CommAnnotation(**fields)  # type: ignore[arg-type]
