"""Hand-built Kineto trace documents: the header, a ProfilerStep, a launch and its kernel, written (gzip or not)
and loaded without the cache."""

import gzip
import json

from tracekit.loader.loading import LoadOptions, load_file


def write(tmp_path, doc, name="t.json", gz=False):
    path = tmp_path / (name + (".gz" if gz else ""))
    data = json.dumps(doc).encode()
    path.write_bytes(gzip.compress(data) if gz else data)
    return str(path)


def trace(events, **header):
    return {"schemaVersion": 1, "traceEvents": events, **header}


STEP = {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#7", "pid": 1, "tid": 1, "ts": 100, "dur": 100}
LAUNCH = {
    "ph": "X",
    "cat": "cuda_runtime",
    "name": "cudaLaunchKernel",
    "pid": 1,
    "tid": 1,
    "ts": 110,
    "dur": 5,
    "args": {"correlation": 42},
}


def kernel(name, ts, dur, corr=42, **args):
    return {
        "ph": "X",
        "cat": "kernel",
        "name": name,
        "pid": 0,
        "tid": 7,
        "ts": ts,
        "dur": dur,
        "args": {"correlation": corr, "stream": 7, "device": 0, **args},
    }


def load(path):
    return load_file(path, LoadOptions(cache=False))
