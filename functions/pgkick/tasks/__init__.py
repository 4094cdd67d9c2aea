"""Task code: the registry, typed handles, results, periodic declarations."""
