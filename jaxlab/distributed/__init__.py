"""Meshes, multi-process launch and collectives."""

__all__: list[str] = []
