"""SSRF guard: which hosts and addresses a cited URL may make us connect to.

Reports are untrusted input, so a cited URL must not reach loopback, private, link-local,
multicast, unspecified, reserved or cloud-metadata addresses. The guard is applied in
three places, all fed by the same :class:`SSRFGuard` policy:

1. before each hop (the cited URL and every redirect target): host names that only exist
   inside a network (``localhost``, ``*.internal``, metadata names) and IP literals;
2. in :class:`GuardedResolver`, the DNS resolver the HTTP connector uses: every address a
   name resolves to is checked, and the connector connects only to those vetted
   addresses, so a DNS answer that changes between check and connect (rebinding) cannot
   slip through: there is no second lookup;
3. in :meth:`SSRFGuard.socket_factory`, the last step before ``connect()``: the exact
   socket address is checked again (defence in depth, e.g. for IP-literal hosts, which
   the connector never hands to the resolver).

Addresses inside ``allow_networks`` are always allowed (tests allow ``127.0.0.1/32``).
``allow_private=True`` allows every non-public address except cloud-metadata endpoints,
which stay refused unless listed in ``allow_networks``.
"""
from __future__ import annotations

import ipaddress
import logging
import socket
from collections.abc import Sequence
from typing import Any

from aiohttp.abc import AbstractResolver, ResolveResult

log = logging.getLogger("drscore.fetch")

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

# Cloud instance-metadata and host-agent endpoints. They are refused even with
# ``allow_private`` (only ``allow_networks`` opens them), and some are public unicast
# addresses that no range check would catch (Azure's WireServer).
METADATA_ADDRESSES = frozenset(ipaddress.ip_address(a) for a in (
    "169.254.169.254",  # AWS, GCP, Azure, OpenStack, DigitalOcean, Hetzner... IMDS
    "169.254.170.2",    # AWS ECS task metadata and credentials
    "169.254.170.23",   # AWS EKS Pod Identity agent (credentials)
    "169.254.169.123",  # AWS Time Sync service
    "169.254.169.253",  # AWS VPC DNS resolver
    "169.254.0.23",     # Tencent Cloud metadata
    "169.254.169.250",  # Google Cloud internal endpoint on some images
    "168.63.129.16",    # Azure WireServer / host agent (a public address!)
    "100.100.100.200",  # Alibaba Cloud metadata
    "192.0.0.192",      # Oracle Cloud (legacy) metadata
    "fd00:ec2::254",    # AWS IMDS over IPv6
    "fd00:ec2::23",     # AWS EKS Pod Identity agent over IPv6
    "fd00:ec2::123",    # AWS Time Sync over IPv6
    "fd00:ec2::253",    # AWS VPC DNS over IPv6
    "fd20:ce::254",     # Google Cloud metadata over IPv6
))
METADATA_HOSTNAMES = frozenset({
    "metadata.google.internal", "metadata.goog", "metadata", "instance-data",
    "instance-data.ec2.internal", "metadata.azure.internal", "metadata.tencentyun.com",
    "metadata.platformequinix.com", "metadata.packet.net",
})
# Names that only resolve inside a machine or a private network.
_PRIVATE_NAME_SUFFIXES = (".localhost", ".internal", ".local", ".localdomain", ".home.arpa")
_PRIVATE_NAMES = frozenset({"localhost", "localhost.localdomain", "ip6-localhost",
                            "ip6-loopback"})

# Refused ranges with the reason shown to users. Anything else that Python does not
# consider globally routable is refused too (see address_refusal).
_BLOCKED: tuple[tuple[IPNetwork, str], ...] = tuple(
    (ipaddress.ip_network(net), why) for net, why in (
        ("0.0.0.0/8", "unspecified/'this network' address"),
        ("10.0.0.0/8", "private address"),
        ("100.64.0.0/10", "carrier-grade NAT shared address"),
        ("127.0.0.0/8", "loopback address"),
        ("169.254.0.0/16", "link-local address"),
        ("172.16.0.0/12", "private address"),
        ("192.0.0.0/24", "IETF protocol assignment"),
        ("192.0.2.0/24", "documentation address"),
        ("192.168.0.0/16", "private address"),
        ("198.18.0.0/15", "benchmarking address"),
        ("198.51.100.0/24", "documentation address"),
        ("203.0.113.0/24", "documentation address"),
        ("224.0.0.0/4", "multicast address"),
        ("240.0.0.0/4", "reserved/broadcast address"),
        ("::/128", "unspecified address"),
        ("::1/128", "loopback address"),
        ("::/96", "deprecated IPv4-compatible IPv6 address"),
        ("64:ff9b:1::/48", "local-use NAT64 address"),
        ("100::/64", "discard-only address"),
        ("2001::/32", "Teredo tunnel address"),
        ("2001:db8::/32", "documentation address"),
        ("fc00::/7", "unique-local (private) address"),
        ("fe80::/10", "link-local address"),
        ("fec0::/10", "site-local address"),
        ("ff00::/8", "multicast address"),
    )
)
_NAT64 = ipaddress.ip_network("64:ff9b::/96")
_SIX_TO_FOUR = ipaddress.ip_network("2002::/16")


class SSRFRefused(OSError):
    """A connection was refused by the SSRF policy (an OSError so the HTTP stack wraps it
    like any other connection failure; the pool classifies it as ``ssrf_refused``)."""


def embedded_ipv4(ip: IPAddress) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 address carries (IPv4-mapped, NAT64, 6to4), if any."""
    if isinstance(ip, ipaddress.IPv4Address):
        return None
    if ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    if ip in _NAT64:
        return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    if ip in _SIX_TO_FOUR:
        return ip.sixtofour
    return None


def parse_address(address: str | IPAddress) -> IPAddress:
    """Parse a textual address (an IPv6 zone suffix such as ``%eth0`` is ignored)."""
    if isinstance(address, (ipaddress.IPv4Address, ipaddress.IPv6Address)):
        return address
    return ipaddress.ip_address(address.split("%", 1)[0].strip("[]"))


def intrinsic_refusal(ip: IPAddress) -> str | None:
    """Why ``ip`` is not a public unicast address, or None when it is (policy-free)."""
    if ip in METADATA_ADDRESSES:
        return "cloud metadata address"
    inner = embedded_ipv4(ip)
    if inner is not None:
        why = intrinsic_refusal(inner)
        return f"IPv6 address embedding {inner}: {why}" if why else None
    for net, why in _BLOCKED:
        if ip.version == net.version and ip in net:
            return why
    if not ip.is_global:
        return "not a globally routable address"
    return None


class SSRFGuard:
    """The fetch policy: what may be connected to. Pure apart from one warning log."""

    def __init__(self, *, allow_private: bool = False, allow_networks: Sequence[str] = ()):
        try:
            self.allow_networks: tuple[IPNetwork, ...] = tuple(
                ipaddress.ip_network(n, strict=False) for n in allow_networks)
        except ValueError as exc:
            raise ValueError(f"allow_networks: {exc}") from None
        self.allow_private = allow_private
        if allow_private:
            log.warning("!!! SSRF GUARD RELAXED (allow_private): cited URLs may reach loopback "
                        "and private-network addresses. Use only for local testing. !!!")

    def _allowed_explicitly(self, ip: IPAddress) -> bool:
        candidates = [ip]
        inner = embedded_ipv4(ip)
        if inner is not None:
            candidates.append(inner)
        return any(c.version == n.version and c in n
                   for c in candidates for n in self.allow_networks)

    def address_refusal(self, address: str | IPAddress) -> str | None:
        """Reason to refuse connecting to ``address``, or None if allowed."""
        try:
            ip = parse_address(address)
        except ValueError:
            return f"unparseable address {address!r}"
        if self._allowed_explicitly(ip):
            return None
        why = intrinsic_refusal(ip)
        if why is None:
            return None
        inner = embedded_ipv4(ip) or ip
        if self.allow_private and ip not in METADATA_ADDRESSES \
                and inner not in METADATA_ADDRESSES:
            return None
        return f"{ip}: {why}"

    def hostname_refusal(self, host: str) -> str | None:
        """Reason to refuse a (normalised) host before any DNS lookup, or None.

        IP literals are checked as addresses; names are checked against metadata and
        private-only names. Ordinary names return None here and are checked after
        resolution by :class:`GuardedResolver`.
        """
        bare = host.strip("[]").rstrip(".").lower()
        try:
            ip = parse_address(bare)
        except ValueError:
            ip = None
        if ip is not None:
            return self.address_refusal(ip)
        if bare in METADATA_HOSTNAMES:
            return f"{bare} is a cloud metadata host name"
        if self.allow_private:
            return None
        if bare in _PRIVATE_NAMES or bare.endswith(_PRIVATE_NAME_SUFFIXES):
            return f"{bare} is a local/private host name"
        return None

    def socket_factory(self, addr_info: tuple[Any, ...]) -> socket.socket:
        """aiohttp ``socket_factory`` hook: vet the exact address before creating a socket."""
        family, type_, proto, _, sockaddr = addr_info
        why = self.address_refusal(sockaddr[0])
        if why is not None:
            raise SSRFRefused(f"ssrf_refused: {why}")
        return socket.socket(family=family, type=type_, proto=proto)


class GuardedResolver(AbstractResolver):
    """Resolve with ``inner`` and refuse the host if any of its addresses is refused.

    Refusing on *any* bad address (rather than dropping the bad ones) keeps an attacker
    from mixing a public and a private answer and hoping for the private one.
    """

    def __init__(self, guard: SSRFGuard, inner: AbstractResolver):
        self.guard = guard
        self.inner = inner

    async def resolve(self, host: str, port: int = 0,
                      family: socket.AddressFamily = socket.AF_INET) -> list[ResolveResult]:
        why = self.guard.hostname_refusal(host)
        if why is not None:
            raise SSRFRefused(f"ssrf_refused: {why}")
        results = await self.inner.resolve(host, port, family)
        if not results:
            raise OSError(f"{host} resolved to no addresses")
        for res in results:
            why = self.guard.address_refusal(res["host"])
            if why is not None:
                raise SSRFRefused(f"ssrf_refused: {host} resolves to {why}")
        return results

    async def close(self) -> None:
        await self.inner.close()
