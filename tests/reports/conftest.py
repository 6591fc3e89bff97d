import pytest

from tests.helpers.browser import Browser


@pytest.fixture(scope="module")
def browser():
    try:
        b = Browser()
    except RuntimeError as exc:
        pytest.fail(str(exc))
    yield b
    b.close()
