"""Side-by-side benchmarks against peers (ratios measured in one run)."""
