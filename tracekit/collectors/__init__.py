"""Collectors: profile() and measurement APIs that run inside a training process."""
