"""Optax gradient transformations from the ICML 2026 papers."""

__all__: list[str] = []
