"""Connections to PostgreSQL: the one psycopg module, lingering connections, pools."""
