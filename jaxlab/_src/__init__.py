"""Shared internals: experiment registry, result writing, runner."""
