"""Shared fixtures, and the one rule that marks tests slow by what they read: a test parametrized over one of the
real traces over 1 MB (tens of thousands of events or more) is `slow`, so `make test-fast` leaves it out; CI runs it
with the rest."""

import pytest

# the fixtures whose loads and sweeps take seconds (tests/data/kineto-gpu*, ≥ 1 MB gzipped)
BIG_TRACES = ("ddp-allreduce-2rank-rank1-oldformat", "mtia-training-single-rank", "single-rank-nocomm-nsresolution")


def pytest_collection_modifyitems(items):
    for item in items:
        callspec = getattr(item, "callspec", None)
        if callspec is not None and any(b in item.nodeid for b in BIG_TRACES):
            item.add_marker(pytest.mark.slow)


@pytest.fixture(autouse=True)
def _isolated_cache(tmp_path, monkeypatch):
    """Each test gets its own cache directory: no test sees another's cache, and none writes the user's real one
    (~/.cache/tracekit, the default when TRACEKIT_CACHE_DIR is unset: a test that unsets it lands in XDG_CACHE_HOME,
    also temporary here)."""
    monkeypatch.setenv("TRACEKIT_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg-cache"))
