"""Analyzers: typed, frozen results from traces and measurements."""
