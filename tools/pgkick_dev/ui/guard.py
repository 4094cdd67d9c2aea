"""Who may use the dashboard: this machine only (unless told otherwise), and actions only
from the dashboard's own pages.

Why both checks on the client and on the Host header: the dashboard binds to
127.0.0.1, but a web page elsewhere can make the browser on this machine send
requests to it (a Host it does not own, by DNS rebinding) or submit a form to it
(a cross-site POST). A request from another address, or naming another host, is
refused unless `pgkick ui --host` was given; an action must come from a page of
the same origin (the Origin header, else the Referer), or it is refused.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Collection
from urllib.parse import urlsplit

from starlette.requests import Request
from starlette.responses import PlainTextResponse
from starlette.types import ASGIApp, Receive, Scope, Send

LOCALHOST = frozenset({"127.0.0.1", "::1", "localhost"})


def _loopback(address: str) -> bool:
    if address == "localhost":
        return True
    try:
        return ipaddress.ip_address(address.strip("[]")).is_loopback
    except ValueError:
        return False


def _host_name(host_header: str) -> str:
    """The name in a Host header, without its port (an IPv6 address keeps no brackets)."""
    return urlsplit(f"//{host_header}").hostname or ""


class LocalOnly:
    """ASGI middleware: refuse (403) any request whose client is not in `allowed` (loopback
    addresses always are) or whose Host header does not name this machine; `allowed`
    None lets everyone in (`pgkick ui --host`)."""

    def __init__(self, app: ASGIApp, allowed: Collection[str] | None) -> None:
        self.app = app
        self.allowed = None if allowed is None else frozenset(allowed)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and self.allowed is not None:
            problem = self.refusal(Request(scope))
            if problem:
                await PlainTextResponse(problem, status_code=403)(scope, receive, send)
                return
        await self.app(scope, receive, send)

    def refusal(self, request: Request) -> str | None:
        assert self.allowed is not None
        client = request.client.host if request.client else ""
        if client not in self.allowed and not _loopback(client):
            return (
                f"refused: the dashboard answers this machine only, not {client or 'unknown'} "
                "(start it with --host to serve others)"
            )
        host = _host_name(request.headers.get("host", ""))
        if host not in self.allowed and not _loopback(host):
            return f"refused: Host {host!r} is not this machine (start it with --host to allow)"
        return None


def cross_origin(request: Request) -> str | None:
    """Why an action request does not come from one of our pages, or None if it does."""
    own = f"{request.url.scheme}://{request.headers.get('host', '')}"
    if request.headers.get("sec-fetch-site") not in (None, "same-origin", "none"):
        return "refused: the request came from another site"
    origin = request.headers.get("origin")
    if origin is not None and origin != "null":
        return None if origin == own else f"refused: the request came from {origin}"
    referer = request.headers.get("referer")
    if referer is not None:
        parts = urlsplit(referer)
        came_from = f"{parts.scheme}://{parts.netloc}"
        return None if came_from == own else f"refused: the request came from {came_from}"
    return "refused: an action needs an Origin or Referer header from the dashboard's own page"
