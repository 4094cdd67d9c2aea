"""The benchmark: `pgkick bench` and its items."""
