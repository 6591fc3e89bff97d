"""Shared builders and helpers of the test suite, imported as ``from tests.helpers.X import Y``."""
