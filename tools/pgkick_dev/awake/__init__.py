"""The awake monitor (`pgkick awake`), the three-ways comparison and its chart."""
