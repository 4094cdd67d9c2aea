"""The statements, one layer per role (producer, worker, maintenance), and migrations."""
