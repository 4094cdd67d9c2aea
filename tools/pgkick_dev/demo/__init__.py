"""The demo: `pgkick demo`, a day of pgkick on an embedded PostgreSQL."""
