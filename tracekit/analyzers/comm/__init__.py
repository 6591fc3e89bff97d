"""Communication: TraceSet in, ``CommResult`` out (communication.py, the ``comm`` analyzer). Each rank's steps are
resolved (steps.py), its hidden and exposed communication measured per step, stream and collective instance
(overlap.py, instances.py); the instances of all ranks are matched across ranks (matching.py) into waits,
transfers, stragglers and bus bandwidth, with the clock offsets between hosts (clocks.py, collectives.py), and
each is given its parallel dimension (dimensions.py). Beside it: what ``tracekit info`` lists (inventory.py) and
the timeline record of the HTML report and ``annotate`` (timeline_record.py)."""
