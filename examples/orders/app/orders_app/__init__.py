"""orders: an app that runs its background jobs with pgkick, deployed from its own project."""
