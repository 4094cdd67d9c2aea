"""Statements for a schema other than `pgkick`: the one rewrite, token-safe.

Why names in statements, not a search_path: a transaction-mode pooler (PgBouncer,
RDS Proxy, Neon's) hands each transaction whichever server connection is free, so
a session `SET search_path` (or a startup `options=-csearch_path`) may be lost or
leak to another client. Every statement in sql/ therefore names pgkick's schema
itself (`pgkick.jobs`), which is valid SQL as it stands for the default schema;
for another schema the identifier `pgkick` is replaced by the quoted name.

Token-safe: only the identifier `pgkick` is replaced (`pgkick.jobs`, `SCHEMA
pgkick`), never inside a string literal ('pgkick.migrate', 'pgkick_worker'), a
quoted identifier, a comment (the first line describes the statement), or a
dollar-quoted body (a DO block or function: there, use current_schema() or the
migration's search_path). Names that merely start with it (`pgkick_migrations`,
`pgkick_worker`) are other identifiers and stay. Where a statement needs the
schema as a *value* (to_regclass, pg_stat_user_tables), it takes `%(schema)s`,
which `pgkick.connections.db.Database` passes with every statement.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import LiteralString

from pgkick.config import DEFAULT_SCHEMA, check_schema_name

# One alternation, scanned left to right: whatever is matched first is a whole token, so
# `pgkick` inside a literal or comment is consumed with it and never seen on its own.
# Compiled at its first use (re's cache): the default schema never rewrites a statement.
_TOKENS = r"""
      '(?:[^']|'')*'                                  # string literal ('' escapes a quote)
    | "(?:[^"]|"")*"                                  # quoted identifier
    | --[^\n]*                                        # line comment
    | /\*.*?\*/                                       # block comment
    | \$(?P<tag>(?:[A-Za-z_][A-Za-z_0-9]*)?)\$.*?\$(?P=tag)\$  # dollar-quoted body
    | (?<![\w$.])(?P<name>pgkick)(?![\w$])            # the schema, qualified or bare
"""


def quote(name: str) -> str:
    """`name` as a quoted SQL identifier."""
    return '"' + name.replace('"', '""') + '"'


@lru_cache(maxsize=1024)
def qualify(sql: str, schema: str) -> LiteralString:
    """`sql` with the schema identifier `pgkick` replaced by `schema` (quoted).

    Cached: a store runs the same few statements again and again, so each is
    rewritten once per schema. The result is safe to run as a query: the only text
    spliced in is a validated identifier, quoted."""
    schema = check_schema_name(schema)
    if schema == DEFAULT_SCHEMA:
        return sql  # mypy reads LiteralString as str: no cast needed (or allowed)
    target = quote(schema)

    def replace(match: re.Match[str]) -> str:
        return target if match["name"] else match[0]

    return re.sub(_TOKENS, replace, sql, flags=re.VERBOSE | re.DOTALL)
