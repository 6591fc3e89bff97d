import pytest


@pytest.fixture(autouse=True)
def _isolated_cache(tmp_path, monkeypatch):
    """Each test gets its own Parquet cache directory: no test sees another's cache."""
    monkeypatch.setenv("TRACEKIT_CACHE_DIR", str(tmp_path / "cache"))
