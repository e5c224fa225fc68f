"""Tests of the registered paper reproductions."""
