"""Flight Recorder analyses: the hang reading of every rank's ring (hang.py), timing without a profiler
(timing.py) and its agreement with Kineto traces of the same run (kineto.py). They read the loader's FlightRun
(tracekit.model.flight), never a dump."""
