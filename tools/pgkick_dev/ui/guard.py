"""Who may use the dashboard: this machine only (unless told otherwise), only under the
host names it was started for, and actions only from the dashboard's own pages.

Why both checks on the client and on the Host header: the dashboard binds to
127.0.0.1, but a web page elsewhere can make the browser on this machine send
requests to it (a Host it does not own, by DNS rebinding) or submit a form to it
(a cross-site POST). A request from another address is refused unless `pgkick ui
--host` was given. Whatever the address, a request naming a host the dashboard was not
started for is refused (as Django's ALLOWED_HOSTS): with --host, a rebound name reaches
any machine that can reach the dashboard, and its pages would be the attacker's site's
own (same origin), free to read them and to post actions. An action must come from a
page of one of those hosts (the Origin header, else the Referer), or it is refused.
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


def _address(name: str) -> bool:
    """An IP address, not a name: a browser sends it as Host only when it was typed (no DNS
    lookup, so nothing to rebind), and a page from elsewhere is of another origin."""
    try:
        ipaddress.ip_address(name.strip("[]"))
    except ValueError:
        return False
    return True


def host_name(host_header: str) -> str:
    """The name in a Host header, without its port (an IPv6 address keeps no brackets)."""
    try:
        return urlsplit(f"//{host_header}").hostname or ""
    except ValueError:  # a malformed header (an unclosed bracket): no name we serve
        return ""


class HostGuard:
    """Which clients the dashboard answers, and which host names a request (its Host
    header) and an action (its Origin) may carry.

    clients: addresses answered besides loopback ones (their names are served too: this
    machine's), or None for every client (`pgkick ui --host`): then the names served are
    loopback ones, any IP address, and `names` (the address bound, `--allowed-host`)."""

    def __init__(self, clients: Collection[str] | None, names: Collection[str] = ()) -> None:
        self.clients = None if clients is None else frozenset(clients)
        self.names = frozenset(name.lower() for name in (*(clients or ()), *names))

    def host_allowed(self, name: str) -> bool:
        name = name.lower()
        if _loopback(name) or name in self.names:
            return True
        return self.clients is None and _address(name)

    def refusal(self, request: Request) -> str | None:
        client = request.client.host if request.client else ""
        if self.clients is not None and client not in self.clients and not _loopback(client):
            return (
                f"refused: the dashboard answers this machine only, not {client or 'unknown'} "
                "(start it with --host to serve others)"
            )
        host = host_name(request.headers.get("host", ""))
        if self.host_allowed(host):
            return None
        if self.clients is not None:
            return f"refused: Host {host!r} is not this machine (start it with --host to allow)"
        return (
            f"refused: Host {host!r} is not a name this dashboard was started for; if it is "
            f"yours, start it with --allowed-host {host or 'NAME'}"
        )


class LocalOnly:
    """ASGI middleware: refuse (403) what `guard` refuses: a client not allowed, a Host
    header naming a host the dashboard does not serve."""

    def __init__(self, app: ASGIApp, guard: HostGuard) -> None:
        self.app = app
        self.guard = guard

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            problem = self.guard.refusal(Request(scope))
            if problem:
                await PlainTextResponse(problem, status_code=403)(scope, receive, send)
                return
        await self.app(scope, receive, send)


def cross_origin(request: Request, guard: HostGuard) -> str | None:
    """Why an action request does not come from one of our pages, or None if it does: its
    Origin (else Referer) must name a host `guard` serves, not merely match the Host header
    (which the sender chooses), and be this request's own scheme, host and port.

    Why https is taken for http: behind a proxy that ends TLS (on another machine, whose
    X-Forwarded-Proto uvicorn does not trust), the dashboard is reached over http from its
    own https pages, and every action was refused. An https page of a served host is as
    much ours (nobody else can serve it without that name's certificate); the reverse, a
    plain-http page posting to an https dashboard, is still refused."""
    host = request.headers.get("host", "")
    own = {f"{request.url.scheme}://{host}"}
    if request.url.scheme == "http":
        own.add(f"https://{host}")
    if request.headers.get("sec-fetch-site") not in (None, "same-origin", "none"):
        return "refused: the request came from another site"
    origin = request.headers.get("origin")
    if origin is None or origin == "null":
        referer = request.headers.get("referer")
        if referer is None:
            return (
                "refused: an action needs an Origin or Referer header from the dashboard's own page"
            )
        parts = urlsplit(referer)
        origin = f"{parts.scheme}://{parts.netloc}"
    if origin in own and guard.host_allowed(host_name(urlsplit(origin).netloc)):
        return None
    return f"refused: the request came from {origin}"
