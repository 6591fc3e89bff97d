"""Flight Recorder dumps -> FlightRun (tracekit.model.flight): the only code that knows how a dump is written.

``read_flight_dir(DIR)`` reads one dump per rank, pickle or JSON, any version; pickles through an unpickler that
resolves no global (safe_pickle.py), fields one by one (entries.py), files found and limited in reading.py."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..._lazy import lazy_getattr

if TYPE_CHECKING:
    from .reading import DumpFormatError, FlightReadOptions, dump_files, read_dump, read_flight_dir
    from .safe_pickle import BadPickleError, UnsafePickleError, loads_plain

_LAZY = {
    **{n: ".reading" for n in ("DumpFormatError", "FlightReadOptions", "dump_files", "read_dump", "read_flight_dir")},
    **{n: ".safe_pickle" for n in ("BadPickleError", "UnsafePickleError", "loads_plain")},
}

__all__ = [
    "BadPickleError",
    "DumpFormatError",
    "FlightReadOptions",
    "UnsafePickleError",
    "dump_files",
    "loads_plain",
    "read_dump",
    "read_flight_dir",
]

__getattr__ = lazy_getattr(__name__, _LAZY, globals())
