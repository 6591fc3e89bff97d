"""What belongs to the process rather than to a trace or a document: limits read from the environment (env.py),
the one opener of every file tracekit writes (outputs.py), the memory the loader and analyzers share (memory.py:
the cyclic collector paused, the C heap trimmed) and the console script's standard streams and exit (process.py).
It imports nothing of tracekit but its errors, so every stage may use it."""
