import pytest


@pytest.fixture(autouse=True)
def _isolated_cache(tmp_path, monkeypatch):
    """Each test gets its own cache directory: no test sees another's cache, and none writes the user's real one
    (~/.cache/tracekit, the default when TRACEKIT_CACHE_DIR is unset: a test that unsets it lands in XDG_CACHE_HOME,
    also temporary here)."""
    monkeypatch.setenv("TRACEKIT_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg-cache"))
