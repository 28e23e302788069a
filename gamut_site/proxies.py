"""Who the client is behind the TLS proxy, and forwarded headers believed only from that proxy.

X-Forwarded-For and X-Forwarded-Proto say whatever their sender wrote. They mean something only
when the sender (REMOTE_ADDR) is one of our own proxies, settings.TRUSTED_PROXIES; from anyone
else they are dropped, so a client that reaches the server directly can neither claim HTTPS nor
pick the address that the login limit counts its failures under.

django-ipware (which django-axes uses by default) is not enough here: its trusted-proxy check
looks at addresses inside X-Forwarded-For, which a direct client writes itself, and never at
REMOTE_ADDR. So axes gets its client address from `client_ip` below (AXES_CLIENT_IP_CALLABLE).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Callable, Iterable
from functools import lru_cache
from typing import TYPE_CHECKING

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

if TYPE_CHECKING:  # settings.py imports this module: keep its imports light
    from django.http import HttpRequest, HttpResponse

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

# The headers a proxy sets about the client's connection (request.META names).
FORWARDED_HEADERS = (
    "HTTP_X_FORWARDED_FOR",
    "HTTP_X_FORWARDED_PROTO",
    "HTTP_X_FORWARDED_HOST",
    "HTTP_X_FORWARDED_PORT",
    "HTTP_FORWARDED",
)


def parse_networks(entries: Iterable[str]) -> tuple[IPNetwork, ...]:
    """TRUSTED_PROXIES as networks; a single address is a network of one."""
    networks = []
    for entry in entries:
        try:
            networks.append(ipaddress.ip_network(entry.strip(), strict=False))
        except ValueError:
            raise ImproperlyConfigured(
                f"TRUSTED_PROXIES: {entry!r} is not an IP address or network (e.g. 10.0.0.0/8)"
            ) from None
    return tuple(networks)


@lru_cache(maxsize=8)
def _networks(entries: tuple[str, ...]) -> tuple[IPNetwork, ...]:
    return parse_networks(entries)


def _address(text: str | None) -> IPAddress | None:
    try:
        address = ipaddress.ip_address((text or "").strip())
    except ValueError:
        return None
    if isinstance(address, ipaddress.IPv6Address):
        # A dual-stack socket reports IPv4 peers as ::ffff:a.b.c.d; compare them as IPv4.
        if address.ipv4_mapped:
            return address.ipv4_mapped
        # A zone (fe80::1%eth0) means nothing beyond this host, and PostgreSQL's inet column
        # (axes stores the address) refuses it.
        if address.scope_id:
            return ipaddress.IPv6Address(address.packed)
    return address


def _trusted(address: IPAddress, networks: tuple[IPNetwork, ...]) -> bool:
    return any(address.version == net.version and address in net for net in networks)


def is_trusted_proxy(remote_addr: str | None) -> bool:
    address = _address(remote_addr)
    return address is not None and _trusted(address, _networks(tuple(settings.TRUSTED_PROXIES)))


def client_ip(request: HttpRequest) -> str | None:
    """The client's address: REMOTE_ADDR, unless that is one of our proxies; then the right-most
    address of X-Forwarded-For that is not one of our proxies (each proxy appends the address it
    was talking to, so everything left of that is the client's own say)."""
    networks = _networks(tuple(settings.TRUSTED_PROXIES))
    client = _address(request.META.get("REMOTE_ADDR"))
    if client is None:
        return None
    hops = (request.META.get("HTTP_X_FORWARDED_FOR") or "").split(",")
    for hop in reversed(hops):
        if not _trusted(client, networks):
            break
        address = _address(hop)
        if address is None:
            # Our proxy passed on a malformed entry it did not write: keep the proxy's address.
            break
        client = address
    return str(client)


def forwarded_headers_middleware(get_response: Callable[[HttpRequest], HttpResponse]):
    """Drops the forwarded headers of a request that did not come from one of our proxies,
    before SecurityMiddleware reads X-Forwarded-Proto (SECURE_PROXY_SSL_HEADER)."""

    def middleware(request: HttpRequest) -> HttpResponse:
        if not is_trusted_proxy(request.META.get("REMOTE_ADDR")):
            for name in FORWARDED_HEADERS:
                request.META.pop(name, None)
        return get_response(request)

    return middleware
