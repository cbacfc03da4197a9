"""SSRF policy as pure checks on addresses and names (no network at all here)."""
from __future__ import annotations

import ipaddress
import logging
import socket

import pytest

from drscore.fetch.guard import GuardedResolver, SSRFGuard, SSRFRefused, embedded_ipv4

REFUSED = [
    "127.0.0.1", "127.255.255.254",          # loopback
    "0.0.0.0", "0.1.2.3",                    # 0.0.0.0/8
    "10.0.0.5", "172.16.0.1", "172.31.255.255", "192.168.1.1",  # RFC 1918
    "100.64.0.1", "100.127.255.254",         # CGNAT 100.64/10
    "169.254.0.1", "169.254.169.254",        # link-local, cloud metadata
    "224.0.0.1", "239.255.255.250",          # multicast
    "240.0.0.1", "255.255.255.255",          # reserved, broadcast
    "192.0.2.10", "198.18.0.1",              # documentation, benchmarking
    "::", "::1",                             # unspecified, loopback
    "fe80::1", "febf::1",                    # link-local fe80::/10
    "fd00::1", "fd00:ec2::254", "fc00::1",   # unique-local, AWS metadata (IPv6)
    "ff02::1",                               # multicast
    "::ffff:127.0.0.1", "::ffff:10.0.0.5",   # IPv4-mapped IPv6
    "::ffff:169.254.169.254",
    "64:ff9b::a00:5",                        # NAT64 of 10.0.0.5
    "2002:a00:5::1",                         # 6to4 of 10.0.0.5
    "::10.0.0.5",                            # deprecated IPv4-compatible
    "2001:db8::1",                           # documentation
]
ALLOWED = ["8.8.8.8", "93.184.215.14", "1.1.1.1", "2606:4700:4700::1111",
           "::ffff:8.8.8.8", "100.63.255.255", "100.128.0.0", "172.32.0.1", "2002:808:808::1"]


@pytest.mark.parametrize("address", REFUSED)
def test_non_public_addresses_are_refused(address: str) -> None:
    assert SSRFGuard().address_refusal(address) is not None


@pytest.mark.parametrize("address", ALLOWED)
def test_public_addresses_are_allowed(address: str) -> None:
    assert SSRFGuard().address_refusal(address) is None


def test_refusal_reasons_name_the_category() -> None:
    guard = SSRFGuard()
    assert "cloud metadata" in guard.address_refusal("169.254.169.254")
    assert "cloud metadata" in guard.address_refusal("fd00:ec2::254")
    assert "carrier-grade NAT" in guard.address_refusal("100.64.0.1")
    assert "loopback" in guard.address_refusal("::ffff:127.0.0.1")
    assert str(embedded_ipv4(ipaddress.ip_address("::ffff:10.0.0.5"))) == "10.0.0.5"
    assert str(embedded_ipv4(ipaddress.ip_address("2002:a00:5::1"))) == "10.0.0.5"


def test_allow_networks_allows_only_the_listed_range() -> None:
    guard = SSRFGuard(allow_networks=["127.0.0.1/32"])
    assert guard.address_refusal("127.0.0.1") is None
    assert guard.address_refusal("::ffff:127.0.0.1") is None  # same address, mapped
    assert guard.address_refusal("127.0.0.2") is not None
    assert guard.address_refusal("10.0.0.5") is not None


def test_allow_private_relaxes_everything_but_metadata(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="drscore.fetch"):
        guard = SSRFGuard(allow_private=True)
    assert "SSRF GUARD RELAXED" in caplog.text
    assert guard.address_refusal("10.0.0.5") is None
    assert guard.address_refusal("127.0.0.2") is None
    assert guard.hostname_refusal("localhost") is None
    assert guard.address_refusal("169.254.169.254") is not None
    assert guard.address_refusal("::ffff:169.254.169.254") is not None
    assert guard.hostname_refusal("metadata.google.internal") is not None


def test_bad_allow_networks_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="allow_networks"):
        SSRFGuard(allow_networks=["not-a-network"])


@pytest.mark.parametrize("host, refused", [
    ("metadata.google.internal", True), ("metadata.goog", True), ("localhost", True),
    ("api.localhost", True), ("db.internal", True), ("printer.local", True),
    ("169.254.169.254", True), ("[::1]", True), ("example.com", False),
    ("internal.example.com", False), ("8.8.8.8", False),
])
def test_hostname_refusal(host: str, refused: bool) -> None:
    assert (SSRFGuard().hostname_refusal(host) is not None) is refused


def test_socket_factory_refuses_before_creating_a_socket(monkeypatch: pytest.MonkeyPatch) -> None:
    created = []
    monkeypatch.setattr(socket, "socket", lambda *a, **k: created.append(a) or None)
    guard = SSRFGuard(allow_networks=["127.0.0.1/32"])
    with pytest.raises(SSRFRefused, match="10.0.0.5"):
        guard.socket_factory((socket.AF_INET, socket.SOCK_STREAM, 6, "", ("10.0.0.5", 80)))
    with pytest.raises(SSRFRefused, match="fd00:ec2::254"):
        guard.socket_factory((socket.AF_INET6, socket.SOCK_STREAM, 6, "",
                              ("fd00:ec2::254", 80, 0, 0)))
    assert created == []


async def test_resolver_refuses_private_answers_and_mixed_answers(fake_resolver) -> None:
    fake = fake_resolver({"evil.test": ["10.0.0.5"], "mixed.test": ["93.184.215.14", "10.0.0.5"],
                         "ok.test": ["93.184.215.14"], "v6.test": ["::ffff:169.254.169.254"]})
    resolver = GuardedResolver(SSRFGuard(), fake)
    with pytest.raises(SSRFRefused, match="evil.test resolves to 10.0.0.5"):
        await resolver.resolve("evil.test", 80)
    # one bad answer poisons the name: no chance to pick the private one later
    with pytest.raises(SSRFRefused, match="10.0.0.5"):
        await resolver.resolve("mixed.test", 80)
    with pytest.raises(SSRFRefused, match="metadata"):
        await resolver.resolve("v6.test", 80)
    assert [r["host"] for r in await resolver.resolve("ok.test", 80)] == ["93.184.215.14"]
    # a metadata name is refused without even asking DNS
    with pytest.raises(SSRFRefused):
        await resolver.resolve("metadata.google.internal", 80)
    assert "metadata.google.internal" not in fake.calls


# Well-known cloud metadata / host-agent endpoints (issue 8). Azure's WireServer is a
# public unicast address, so only an explicit list refuses it; the others must say
# "cloud metadata" (not just "link-local") and stay refused under allow_private.
METADATA = [
    "168.63.129.16",    # Azure WireServer
    "169.254.169.254",  # AWS/GCP/Azure IMDS
    "169.254.170.2",    # AWS ECS credentials
    "100.100.100.200",  # Alibaba
    "192.0.0.192",      # Oracle
    "169.254.0.23",     # Tencent
    "fd00:ec2::254",    # AWS IMDS IPv6
    "fd20:ce::254",     # GCP metadata IPv6
]


@pytest.mark.parametrize("address", METADATA)
def test_cloud_metadata_addresses_are_refused_even_with_allow_private(address: str) -> None:
    assert "cloud metadata" in SSRFGuard().address_refusal(address)
    assert "cloud metadata" in SSRFGuard(allow_private=True).address_refusal(address)
    assert SSRFGuard().hostname_refusal(address) is not None
    assert SSRFGuard().hostname_refusal(f"[{address}]" if ":" in address else address) is not None


@pytest.mark.parametrize("spelling", [
    "::ffff:168.63.129.16",        # IPv4-mapped
    "64:ff9b::a83f:8110",          # NAT64 of 168.63.129.16 (0xa8=168, 0x3f=63, 0x81=129, 0x10=16)
    "2002:a83f:8110::1",           # 6to4 of 168.63.129.16
])
def test_wireserver_is_refused_in_its_ipv6_spellings(spelling: str) -> None:
    assert "cloud metadata" in SSRFGuard(allow_private=True).address_refusal(spelling)


def test_wireserver_neighbours_stay_public() -> None:
    # only the one address is special; its /24 neighbours are ordinary public addresses
    assert SSRFGuard().address_refusal("168.63.129.15") is None
    assert SSRFGuard().address_refusal("168.63.129.17") is None


def test_metadata_host_names_of_other_clouds_are_refused() -> None:
    assert "metadata" in SSRFGuard(allow_private=True).hostname_refusal("metadata.tencentyun.com")
