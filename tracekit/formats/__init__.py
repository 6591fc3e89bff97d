"""The documents tracekit writes for itself and reads back (beside the trace format, which the loader owns)."""
