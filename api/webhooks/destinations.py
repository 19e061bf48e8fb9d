"""Where webhooks may be sent: http(s) URLs only, to the hosts the operator allows
(``INLET_WEBHOOK_ALLOWED_HOSTS``; empty: any), at addresses the webhooks' egress policy allows
(``spark_jobs.egress``: besides what every tenant address is denied, the private ranges, unless the
operator opens them; docs/security.md). Checked when a URL is written and again at every attempt, so
a host taken off the list, or a name that now resolves to a denied address, gets nothing more."""

from __future__ import annotations

from urllib.parse import urlsplit

from api.core.urls import check_http_url


def check_webhook_url(url: str) -> str:
    """An http(s) URL with a host, without credentials or a fragment (a query is the receiver's)."""
    parts = check_http_url(url, credentials_hint="webhooks are authenticated by their signature")
    if parts.fragment or url.endswith("#"):
        raise ValueError("the URL must not have a fragment")
    return url


def host_of(url: str) -> str:
    return (urlsplit(url).hostname or "").lower().rstrip(".")


def host_allowed(url: str, allowed: list[str]) -> bool:
    """Whether ``url``'s host may be called: any host when ``allowed`` is empty; else a name listed,
    or a subdomain of a ``*.domain`` listed."""
    if not allowed:
        return True
    host = host_of(url)
    return any(host == entry or (entry.startswith("*.") and host.endswith(entry[1:])) for entry in allowed)
