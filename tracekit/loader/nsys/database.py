"""An Nsight Systems SQLite export opened read-only, and queries whose results arrive as numpy columns.

Queries run through Apache Arrow's ADBC SQLite driver: SQLite scans and joins, the rows come back as Arrow
record batches (no Python object per row), and each column goes to numpy as it is. Every integer column is
read through ``int_of`` -- an SQL expression that yields NULL for a cell that is not a number (an export is
untrusted input; a text in an INTEGER column would otherwise stop the driver, which fixes a column's type on its
first batch) -- and NULL becomes -1, the EventTable's "absent".
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable

import numpy as np

from ...errors import MissingDependencyError, TraceFormatError
from ..files import open_regular

ABSENT = -1
_BATCH_ROWS = 65536
_MAGIC = b"SQLite format 3\x00"


def int_of(column: str) -> str:
    """The SQL of an integer cell that is NULL unless the cell holds a number (reals are truncated)."""
    c = f'"{column}"'
    return f"CASE typeof({c}) WHEN 'integer' THEN {c} WHEN 'real' THEN CAST({c} AS INTEGER) END"


def text_of(column: str) -> str:
    """The SQL of a text cell: '' where NULL (the driver types a column by its first batch, so no NULLs)."""
    return f"COALESCE(CAST(\"{column}\" AS TEXT), '')"


class Export:
    """One open export: which tables and columns it has, and queries as columns. Use as a context manager."""

    def __init__(self, path: str):
        self.path = path
        _check_header(path)
        try:
            from adbc_driver_sqlite import dbapi
        except ImportError:
            raise MissingDependencyError(
                f"{path}: reading Nsight Systems exports needs the 'adbc-driver-sqlite' package: pip install 'tracekit[nsys]'"
            ) from None
        uri = "file:" + os.path.abspath(path).replace("?", "%3f").replace("#", "%23") + "?mode=ro"
        try:
            self._conn = dbapi.connect(uri)
            self._cur = self._conn.cursor()
            self._cur.adbc_statement.set_options(**{"adbc.sqlite.query.batch_rows": str(_BATCH_ROWS)})
            names = self._rows("SELECT name FROM sqlite_master WHERE type IN ('table', 'view')")
        except Exception as exc:  # a corrupt database: whatever the driver raises
            self.close()
            raise TraceFormatError(
                f"{path}: not a readable SQLite database ({_why(exc)}); re-export it with nsys export"
            ) from None
        self.tables = frozenset(str(n[0]) for n in names)
        self._columns: dict[str, frozenset[str]] = {}

    def __enter__(self) -> Export:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        for obj in (getattr(self, "_cur", None), getattr(self, "_conn", None)):
            if obj is not None:
                with contextlib.suppress(Exception):
                    obj.close()

    def has(self, table: str) -> bool:
        return table in self.tables

    def columns(self, table: str) -> frozenset[str]:
        """The columns ``table`` has (none when it is absent)."""
        if table not in self._columns:
            if table not in self.tables:
                self._columns[table] = frozenset()
            else:
                rows = self._rows(f"SELECT name FROM pragma_table_info('{_quote(table)}')")
                self._columns[table] = frozenset(str(r[0]) for r in rows)
        return self._columns[table]

    def _rows(self, sql: str) -> list[tuple]:
        self._cur.execute(sql)
        return self._cur.fetchall()

    def arrow(self, sql: str):
        """The result of ``sql`` as a pyarrow Table."""
        try:
            self._cur.execute(sql)
            return self._cur.fetch_arrow_table()
        except Exception as exc:
            raise TraceFormatError(
                f"{self.path}: the export cannot be read ({_why(exc)}); is it a complete nsys export?"
            ) from None

    def ints(self, sql: str, names: Iterable[str], plain: str | None = None) -> dict[str, np.ndarray]:
        """The integer columns ``names`` of ``sql``'s result as int64 arrays, -1 where NULL. ``plain``: the same query
        reading the columns as they are, tried first (it scans faster; a cell that is not an integer stops it, and
        then ``sql``, whose columns are ``int_of`` expressions, runs)."""
        table = None
        if plain is not None:
            try:
                self._cur.execute(plain)
                table = self._cur.fetch_arrow_table()
            except Exception:  # a text or real where nsys writes integers: the careful query
                table = None
            if table is not None and not all(_integral(table.column(n).type) for n in names):
                table = None
        if table is None:
            table = self.arrow(sql)
        out = {}
        for name in names:
            col = table.column(name)
            if table.num_rows == 0:
                out[name] = np.empty(0, np.int64)
                continue
            if col.null_count:
                import pyarrow.compute as pc

                col = pc.fill_null(col, ABSENT)
            out[name] = np.asarray(col.to_numpy(), dtype=np.int64)
        return out

    def texts(self, sql: str, name: str) -> list[str]:
        """One text column of a small result (metadata, dictionaries) as Python strings."""
        table = self.arrow(sql)
        return [] if table.num_rows == 0 else [str(v) for v in table.column(name).to_pylist()]

    def pairs(self, sql: str) -> list[tuple[str, str]]:
        """A small two-column text result (name, value) as tuples."""
        table = self.arrow(sql)
        if table.num_rows == 0:
            return []
        return list(zip(map(str, table.column(0).to_pylist()), map(str, table.column(1).to_pylist())))


def _integral(t) -> bool:
    import pyarrow as pa

    return pa.types.is_integer(t) or pa.types.is_null(t)


def _check_header(path: str) -> None:
    """A regular file that starts as SQLite databases do (else a one-line error, before any driver opens it)."""
    with open_regular(path, TraceFormatError, "Nsight Systems export") as fh:
        try:
            head = fh.read(len(_MAGIC))
        except OSError as exc:
            raise TraceFormatError(f"{path}: read error ({exc.strerror or exc})") from None
    if head != _MAGIC:
        raise TraceFormatError(
            f"{path}: not an SQLite database (an Nsight Systems export is written by `nsys export --type sqlite`); "
            "export the report again"
        )


def _quote(name: str) -> str:
    return name.replace("'", "''")


def _why(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return (text[:160] + "…") if len(text) > 160 else (text or type(exc).__name__)
