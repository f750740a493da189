"""Who may read `/metrics`: nobody unless it is turned on, then a scraper with the token
or one connecting from an allowed address (settings METRICS_TOKEN and
METRICS_ALLOWED_ADDRESSES). Session logins and API tokens never count: the figures are
for monitoring systems, not for the product's roles.
"""

from __future__ import annotations

import enum
import hmac
import ipaddress

from django.conf import settings


class ScrapeAccess(enum.Enum):
    OFF = "off"  # neither a token nor an address is set: /metrics does not exist (404)
    REFUSED = "refused"  # 403
    ALLOWED = "allowed"


def _bearer(authorization: str) -> str | None:
    scheme, _, credentials = authorization.partition(" ")
    return credentials.strip() if scheme.lower() == "bearer" and credentials.strip() else None


def _address_allowed(remote_addr: str, networks: list[str]) -> bool:
    try:
        address = ipaddress.ip_address(remote_addr)
    except ValueError:
        return False
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped:
        address = address.ipv4_mapped
    return any(address in ipaddress.ip_network(network) for network in networks)


def scrape_access(*, authorization: str, remote_addr: str) -> ScrapeAccess:
    """`authorization` is the request's Authorization header, `remote_addr` the address of
    the connection (REMOTE_ADDR: never a forwarded-for header, which a client writes)."""
    token = settings.METRICS_TOKEN
    networks = settings.METRICS_ALLOWED_ADDRESSES
    if not token and not networks:
        return ScrapeAccess.OFF
    offered = _bearer(authorization)
    if token and offered is not None:
        # A wrong token is refused even from an allowed address: it is a misconfigured
        # scraper, better told than silently let in.
        if hmac.compare_digest(offered.encode(), token.encode()):
            return ScrapeAccess.ALLOWED
        return ScrapeAccess.REFUSED
    if networks and _address_allowed(remote_addr, networks):
        return ScrapeAccess.ALLOWED
    return ScrapeAccess.REFUSED
