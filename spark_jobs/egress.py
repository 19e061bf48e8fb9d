"""The egress policy: which addresses Inlet may connect to for a tenant, and the one way it connects.

Every address a tenant supplies (a webhook URL, a schema registry URL, an OAuth token endpoint, Kafka
bootstrap servers) goes through here, in the control plane and in the Spark job alike:

- ``EgressPolicy.check_host`` at definition time: an IP address in any spelling the resolver takes
  (``2130706433``, ``0x7f000001``, ``0177.0.0.1``, ``127.1``, ``[::ffff:127.0.0.1]``) is that one
  address; an IPv4 address written otherwise than ``a.b.c.d`` is refused outright (nothing legitimate
  needs it); a name is resolved, briefly, and refused when any of its addresses is denied. A name
  that does not resolve (yet) is accepted: it is checked again at every connection.
- ``EgressPolicy.resolve`` at connect time: the host resolved once (``getaddrinfo``, whose numeric
  parsing is the one ``check_host`` uses), every address checked, and the addresses handed back, so
  the caller connects to what was checked and an attacker's DNS gets no second answer to change.
- ``http_client``: httpx over a network backend that resolves and checks, then connects to the
  checked address; TLS still verifies the certificate against the URL's host name (SNI too). No
  redirects are followed and no proxy is taken from the environment; a client's total deadline per
  request (``outbound``) holds on every connection it opens.
- ``open_tcp``: the same for a plain socket.

An address is denied when it lies in a ``deny`` range and in no ``allow`` range (allow wins). An
IPv4-mapped IPv6 address (``::ffff:a.b.c.d``) and a NAT64 one (``64:ff9b::a.b.c.d``) are checked as
their IPv4 address too. Refusals name the range's kind, never the address a name resolved to (that
would show a tenant the platform's internal DNS), and never the URL.
"""

from __future__ import annotations

import ipaddress
import re
import socket
import ssl
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import cache
from typing import Any
from urllib.parse import urlsplit

import httpcore
import httpx

from spark_jobs.outbound import DeadlineClient, DeadlineStream

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

# The kinds of the ranges Inlet knows, for messages; a range the operator adds is "operator-denied".
RANGE_KINDS: Mapping[str, str] = {
    "127.0.0.0/8": "loopback",
    "::1/128": "loopback",
    "169.254.0.0/16": "link-local, cloud metadata included",
    "fe80::/10": "link-local",
    "0.0.0.0/8": "unspecified",
    "::/128": "unspecified",
    "224.0.0.0/4": "multicast",
    "ff00::/8": "multicast",
    "255.255.255.255/32": "broadcast",
    "fd00:ec2::254/128": "cloud metadata",
    "100.100.100.200/32": "cloud metadata",
    "::ffff:127.0.0.0/104": "loopback",
    "::ffff:169.254.0.0/112": "link-local, cloud metadata included",
    "::ffff:0.0.0.0/104": "unspecified",
    "::ffff:224.0.0.0/100": "multicast",
    "10.0.0.0/8": "private",
    "172.16.0.0/12": "private",
    "192.168.0.0/16": "private",
    "100.64.0.0/10": "shared address space",
    "fc00::/7": "private",
}
DEFAULT_DENY: tuple[str, ...] = (
    "127.0.0.0/8", "::1/128", "169.254.0.0/16", "fe80::/10", "0.0.0.0/8", "::/128", "224.0.0.0/4", "ff00::/8",
    "255.255.255.255/32", "fd00:ec2::254/128", "100.100.100.200/32",
    "::ffff:127.0.0.0/104", "::ffff:169.254.0.0/112", "::ffff:0.0.0.0/104", "::ffff:224.0.0.0/100",
)
# Denied to webhooks besides DEFAULT_DENY: a webhook is the one path whose per-target results (status,
# latency, "could not connect") a tenant reads back, which would make it a scanner of the private network.
PRIVATE_RANGES: tuple[str, ...] = ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "100.64.0.0/10", "fc00::/7")

DEFINITION_LOOKUP_S = 2.0  # how long a definition's lookups may take before a name is taken unresolved
_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")
# WHATWG URL: a host whose last label is a number (decimal, or 0x hex) is an IPv4 address.
_NUMERIC_LABEL = re.compile(r"^(?:[0-9]+|0[xX][0-9a-fA-F]*)$")


class EgressRefused(Exception):
    """The policy refuses a host; ``message`` says why without the URL or a resolved address."""

    def __init__(self, message: str, *, kind: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.kind = kind  # the denied range's kind; None for a refused spelling


def networks(cidrs: Iterable[str]) -> tuple[IPNetwork, ...]:
    """CIDRs (or bare addresses) as networks; ``ValueError`` naming the first bad one."""
    out = []
    for cidr in cidrs:
        try:
            out.append(ipaddress.ip_network(cidr.strip(), strict=False))
        except ValueError:
            raise ValueError(f"{cidr!r} is not an IP address or CIDR range") from None
    return tuple(out)


_KINDS: Mapping[IPNetwork, str] = {ipaddress.ip_network(cidr): kind for cidr, kind in RANGE_KINDS.items()}


def shown(address: IPAddress) -> str:
    """``address`` as people write it (an IPv4-mapped one as ``::ffff:a.b.c.d``)."""
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return f"::ffff:{address.ipv4_mapped}"
    return str(address)


def _embedded_v4(address: IPAddress) -> ipaddress.IPv4Address | None:
    if isinstance(address, ipaddress.IPv4Address):
        return None
    if address.ipv4_mapped is not None:
        return address.ipv4_mapped
    if address in _NAT64:
        return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    return None


def literal(host: str) -> tuple[IPAddress, bool] | None:
    """``host`` as an IP address, and whether it was written canonically (``a.b.c.d`` or IPv6); None
    for a name. Numeric IPv4 spellings are parsed as the resolver parses them (``inet_aton``)."""
    bare = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    try:
        return ipaddress.ip_address(bare.split("%", 1)[0]), True
    except ValueError:
        pass
    if not _NUMERIC_LABEL.match(bare.rstrip(".").rsplit(".", 1)[-1]):
        return None
    try:
        packed = socket.inet_aton(bare)
    except OSError:
        raise EgressRefused("the host ends in a number but is not an IPv4 address; write an IPv4 address as "
                            "a.b.c.d") from None
    return ipaddress.IPv4Address(packed), False


def _lookup(host: str, port: int, timeout_s: float | None) -> list[IPAddress]:
    """``getaddrinfo`` bounded by ``timeout_s`` (it has no timeout of its own): a daemon thread per
    lookup, so a slow name server holds up no caller past the bound (and no pool survives a fork)."""
    outcome: list[Any] = []

    def run() -> None:
        try:
            outcome.append(socket.getaddrinfo(host, port, type=socket.SOCK_STREAM))
        except OSError as exc:
            outcome.append(exc)

    worker = threading.Thread(target=run, name="egress-lookup", daemon=True)
    worker.start()
    worker.join(timeout_s)
    if not outcome:
        raise TimeoutError(f"no answer from the name server within {timeout_s:g}s")
    if isinstance(outcome[0], OSError):
        raise outcome[0]
    found: list[IPAddress] = []
    for _family, _type, _proto, _name, sockaddr in outcome[0]:
        address = ipaddress.ip_address(str(sockaddr[0]).split("%", 1)[0])
        if address not in found:
            found.append(address)
    return found


@dataclass(frozen=True)
class EgressPolicy:
    """Denied and allowed ranges (allow wins), and how long a definition's names may take to resolve
    (0: names are checked at connections only); picklable, so it travels to Spark executors in a plan."""

    deny: tuple[IPNetwork, ...] = field(default_factory=lambda: networks(DEFAULT_DENY))
    allow: tuple[IPNetwork, ...] = ()
    definition_lookup_s: float = DEFINITION_LOOKUP_S

    @classmethod
    def of(cls, deny: Iterable[str] = DEFAULT_DENY, allow: Iterable[str] = (), *,
           definition_lookup_s: float = DEFINITION_LOOKUP_S) -> EgressPolicy:
        return cls(deny=networks(deny), allow=networks(allow), definition_lookup_s=definition_lookup_s)

    def denying(self, more: Iterable[str]) -> EgressPolicy:
        """This policy with ``more`` ranges denied (the webhooks' policy)."""
        return EgressPolicy(deny=self.deny + networks(more), allow=self.allow,
                            definition_lookup_s=self.definition_lookup_s)

    def denied_kind(self, address: IPAddress) -> str | None:
        """The kind of the denied range ``address`` lies in, or None where it may be connected to."""
        candidates: list[IPAddress] = [address]
        if (embedded := _embedded_v4(address)) is not None:
            candidates.append(embedded)
        if any(c.version == net.version and c in net for c in candidates for net in self.allow):
            return None
        hits = [net for c in candidates for net in self.deny if c.version == net.version and c in net]
        if not hits:
            return None
        narrowest = max(hits, key=lambda net: net.prefixlen)
        return _KINDS.get(narrowest, "operator-denied")

    def check_address(self, address: IPAddress, *, written: str | None = None) -> None:
        """Refuse a denied ``address``; ``written``: how the tenant spelled it, if not canonically."""
        kind = self.denied_kind(address)
        if kind is not None:
            spelled = f" (written {written})" if written else ""
            raise EgressRefused(f"the host is {shown(address)}{spelled}, which is in a denied range ({kind})",
                                kind=kind)

    def check_host(self, host: str, *, timeout_s: float | None = None) -> None:
        """Definition time: refuse ``host`` if it is, or resolves now to, a denied address, or if it
        is an IPv4 address spelled otherwise than ``a.b.c.d``. A name that does not resolve within
        ``timeout_s`` (default ``definition_lookup_s``) passes: it is checked at every connection."""
        timeout_s = self.definition_lookup_s if timeout_s is None else timeout_s
        parsed = literal(host)
        if parsed is not None:
            address, canonical = parsed
            self.check_address(address, written=None if canonical else host)
            if not canonical:
                raise EgressRefused(f"write the IPv4 address as a.b.c.d ({address}), not {host}")
            return
        if timeout_s <= 0:
            return
        try:
            addresses = _lookup(host, 0, timeout_s)
        except (OSError, TimeoutError):
            return
        self._check_resolved(addresses)

    def check_url(self, url: str, *, timeout_s: float | None = None) -> None:
        """``check_host`` of ``url``'s host, as the standard library and as httpx (the client that
        connects) read it, should they ever differ."""
        hosts = [urlsplit(url).hostname or ""]
        try:
            hosts.append(httpx.URL(url).host)
        except httpx.InvalidURL:
            hosts.append("")  # a URL httpx cannot parse is refused below, after the address check
        for host in dict.fromkeys(h.lower() for h in hosts if h):
            self.check_host(host, timeout_s=timeout_s)
        if not hosts[1]:
            raise EgressRefused("the URL's host is not a valid host name or IP address")

    def resolve(self, host: str, port: int, *, timeout_s: float | None) -> list[str]:
        """Connect time: ``host``'s addresses, every one checked, to connect to (not ``host``).
        ``OSError`` where the name does not resolve, ``TimeoutError`` past ``timeout_s``."""
        parsed = literal(host)
        if parsed is not None:
            self.check_address(parsed[0], written=None if parsed[1] else host)
            return [str(parsed[0])]
        addresses = _lookup(host, port, timeout_s)
        self._check_resolved(addresses)
        return [str(a) for a in addresses]

    def _check_resolved(self, addresses: list[IPAddress]) -> None:
        for address in addresses:
            kind = self.denied_kind(address)
            if kind is not None:
                raise EgressRefused(f"the host resolves to an address in a denied range ({kind})", kind=kind)


def open_tcp(policy: EgressPolicy, host: str, port: int, *, timeout_s: float) -> socket.socket:
    """A TCP connection to ``host``'s first reachable checked address."""
    last: OSError | None = None
    for address in policy.resolve(host, port, timeout_s=timeout_s):
        try:
            return socket.create_connection((address, port), timeout=timeout_s)
        except OSError as exc:
            last = exc
    raise last or OSError(f"no address to connect to for {host}")


class _CheckedBackend(httpcore.SyncBackend):
    """httpcore's own backend, connecting to the policy's checked addresses instead of the host name
    (TLS is started afterwards by httpcore with the URL's host as SNI and verified name)."""

    def __init__(self, policy: EgressPolicy) -> None:
        self.policy = policy

    def connect_tcp(self, host: str, port: int, timeout: float | None = None, local_address: str | None = None,
                    socket_options: Iterable[Any] | None = None) -> httpcore.NetworkStream:
        try:
            addresses = self.policy.resolve(host, port, timeout_s=timeout)
        except TimeoutError as exc:
            raise httpcore.ConnectTimeout(str(exc)) from None
        except OSError as exc:
            raise httpcore.ConnectError(str(exc)) from None
        last: Exception | None = None
        for address in addresses:
            try:
                return DeadlineStream(super().connect_tcp(address, port, timeout, local_address, socket_options))
            except (httpcore.ConnectError, httpcore.ConnectTimeout) as exc:
                last = exc
        assert last is not None  # resolve returns at least one address or raises
        raise last


class EgressTransport(httpx.HTTPTransport):
    def __init__(self, policy: EgressPolicy, *, verify: ssl.SSLContext | bool = True) -> None:
        context = verify if isinstance(verify, ssl.SSLContext) else _tls_context(verify)
        super().__init__(verify=context, trust_env=False)
        # httpx's transport takes no network backend: its pool is rebuilt with the checking one.
        self._pool = httpcore.ConnectionPool(ssl_context=context, network_backend=_CheckedBackend(policy))


@cache
def _tls_context(verify: bool) -> ssl.SSLContext:
    """httpx's TLS context (certifi's CAs when ``verify``), made once per process: loading the CAs
    took 29 ms, which every run paid twice per client before the first byte to its registry. Shared
    as httpcore shares its own default context: every connection sets the same ALPN list on it
    (HTTP/1.1), and nothing else writes to it. A CA bundle changed on disk is read by the next process."""
    return httpx.create_ssl_context(verify=verify, trust_env=False)


def http_client(policy: EgressPolicy, *, verify: ssl.SSLContext | bool = True, total_s: float | None = None,
                **options: Any) -> httpx.Client:
    """An httpx client whose every connection goes through ``policy``; ``EgressRefused`` is raised
    as is from a request to a denied address. No redirects, no proxies from the environment. With
    ``total_s``, each request has that long from its send to its body's end (``outbound``)."""
    return DeadlineClient(total_s=total_s, transport=EgressTransport(policy, verify=verify), follow_redirects=False,
                          trust_env=False, **options)
