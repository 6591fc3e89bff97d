"""The dependency graph over all ranks: TraceSet and the comm analyzer's result in, a frozen ``Graph`` out
(build.py; its data types in structure.py, the host-side edges in host_edges.py). On it: each step's critical
path (critical_path.py, ``CriticalPaths``), the what-if replay with changed durations (whatif.py) and the report's
table of obvious what-if questions (whatif_table.py)."""
