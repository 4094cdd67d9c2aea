"""How work reaches a worker: kickers, the default kicker, the presence protocol (watch)."""
