"""Single-rank breakdowns: TraceSet (re-stepped by the comm analyzer) in, one ``RankBreakdowns`` per rank out
(rank_breakdowns.py, the ``breakdowns`` analyzer): device time by kernel and kernel class (kernels.py,
kernel_classes.py), the exclusive busy partition, idle time by cause (idle.py) and launch statistics
(launches.py), all over the device span of each step (device_scope.py)."""
