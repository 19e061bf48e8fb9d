"""The one check of an http(s) URL that Inlet calls out to (a schema registry, a webhook), and of a host name.

Messages say what is wrong without repeating the URL: a password pasted into it must not come back.
"""

from __future__ import annotations

import ipaddress
import re
from urllib.parse import SplitResult, urlsplit

HOSTNAME = re.compile(r"^(?=.{1,253}\Z)([A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)(\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*\Z")


def check_http_url(url: str, *, credentials_hint: str) -> SplitResult:
    """``url`` split, if it is http(s) with a valid host and port and no credentials in it; else
    ``ValueError`` (``credentials_hint``: where credentials go instead)."""
    if url != url.strip() or any(c.isspace() for c in url):
        raise ValueError("the URL must not contain spaces")
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https"):
        raise ValueError("the URL must start with http:// or https://")
    if "@" in parts.netloc:
        raise ValueError(f"the URL must not hold credentials (user:password@): {credentials_hint}")
    try:
        host, port = parts.hostname, parts.port
    except ValueError:
        port = 0
    if port is not None and not 1 <= port <= 65535:
        raise ValueError("the URL's port is not a number from 1 to 65535")
    if not host:
        raise ValueError("the URL has no host")
    if parts.netloc.startswith("["):
        try:
            ipaddress.IPv6Address(host)
        except ValueError:
            raise ValueError("the URL's bracketed host is not an IPv6 address") from None
    elif not HOSTNAME.match(host):
        raise ValueError("the URL's host is not a valid host name or IPv4 address")
    return parts
