"""Keeping a DSN's password out of every message, whatever shape the DSN has.

Why its own module: libpq quotes the part of a DSN it could not parse
(`invalid percent-encoded token: "se%cret"`, `missing "=" after "cret"`,
`failed to resolve host 'cret@db.example.com'`), so a password with an
unencoded `%`, space or `@` lands in exceptions, CLI errors and logs. The
DSN cannot be trusted to parse, so the candidates for its secret are read
from the raw text as well (a URL's user info up to its last `@`, its scheme
missing or mistyped too, a keyword
`password=` value up to the next libpq keyword), and any quoted fragment of a
message that holds a piece of one is replaced, as is any unquoted occurrence of
a whole candidate of 8 characters or more.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from urllib.parse import unquote

MASK = "***"
MIN_BARE = 8  # shorter secrets are masked only inside quotes, where libpq echoes DSN text
# Patterns as text, compiled at their first use (re's cache): a process redacts only when a
# message names a DSN, and three compiles at import were 0.4 ms of every worker cold start.
_QUOTED = r"\"[^\"]*\"|'[^']*'"
# A candidate's pieces split at the DSN syntax libpq stops at, quotes included: a keyword
# password written in double quotes ("pw secret") reaches libpq's error as `secret"`.
_PIECES = r"[\s@:/?&=#\"']+"
# libpq's connection keywords (PostgreSQL 17's). A keyword password's candidate runs to the
# next of them, not to any `word=`: libpq ends an unquoted value at a space, and the rest of
# the password (`password=pw secret==`, base64's padding) comes back as an unknown option
# (`invalid connection option "secret"`). A keyword missing here only masks more.
_KEYWORDS = (
    "service|user|password|passfile|require_auth|channel_binding|connect_timeout|dbname|"
    "host|hostaddr|port|client_encoding|options|application_name|"
    "fallback_application_name|keepalives|keepalives_idle|keepalives_interval|"
    "keepalives_count|tcp_user_timeout|sslmode|sslnegotiation|sslcompression|sslcert|"
    "sslkey|sslcertmode|sslpassword|sslrootcert|sslcrl|sslcrldir|sslsni|requirepeer|"
    "ssl_min_protocol_version|ssl_max_protocol_version|gssencmode|krbsrvname|gsslib|"
    "gssdelegation|replication|target_session_attrs|load_balance_hosts"
)
_KEYWORD_FIRST = r"\s*\w+\s*="  # key=value text starts with a keyword and its `=`
_KEYWORD_PASSWORD = rf"(?s)password\s*=\s*('(?:[^'\\]|\\.)*'|.*?)(?=\s+(?:{_KEYWORDS})\s*=|$)"


def secrets_of(dsn: str) -> set[str]:
    """What in this DSN text may be a password (more than the password, never less)."""
    found: set[str] = set()
    scheme = dsn.find("://")
    if scheme != -1 and "@" in dsn[scheme + 3 :]:
        userinfo = dsn[scheme + 3 : dsn.rindex("@")]
        found.add(userinfo.partition(":")[2] or userinfo)
    elif scheme == -1 and "@" in dsn and not re.match(_KEYWORD_FIRST, dsn):
        # a URL without its scheme or with a mistyped one (`app:pw@host/db`,
        # `postgresql:/app:pw@...`): libpq takes it for key=value text and quotes it whole
        userinfo = dsn[: dsn.rindex("@")]
        found.add(userinfo.partition(":")[2] or userinfo)
    for match in re.finditer(_KEYWORD_PASSWORD, dsn):
        found.add(match[1].strip("'"))
    if "password=" in dsn and scheme != -1:  # a URL's ?password= parameter
        found.add(dsn.split("password=", 1)[1].split("&", 1)[0])
    return {text for secret in found for text in (secret, unquote(secret)) if text}


def redact(message: str, dsns: Iterable[str | None]) -> str:
    """The message without any password of these DSNs (None entries are skipped)."""
    secrets = set().union(*(secrets_of(dsn) for dsn in dsns if dsn))
    if not secrets:
        return message
    pieces = {piece for s in secrets for piece in re.split(_PIECES, s) if len(piece) >= 2}

    def fragment(match: re.Match[str]) -> str:
        text = match[0][1:-1]
        if any(piece in text for piece in pieces) or any(s in text for s in secrets):
            return match[0][0] + MASK + match[0][0]
        return match[0]

    # Whole candidates first: a password holding a quote character (`pw"secret`) splits the
    # quoted echo of it in two, and masking the first half would hide it from this pass.
    for secret in sorted(secrets, key=len, reverse=True):
        if len(secret) >= MIN_BARE:  # a short one may be an ordinary word ("pgkick")
            message = message.replace(secret, MASK)
    return re.sub(_QUOTED, fragment, message)
