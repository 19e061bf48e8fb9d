"""The egress policy (``spark_jobs.egress``) at the API's edge: an address a tenant supplies, checked
when it is written, and a refusal (then, or at a connection) as a 422 naming its field and the rule.

Definition-time checks are a courtesy to the tenant and a first line: the names of one request are
resolved for at most the policy's ``definition_lookup_s`` in all (``INLET_EGRESS_LOOKUP_S``), and one
that does not resolve by then is accepted. What protects the platform is the check at every
connection, which no name escapes.
"""

from __future__ import annotations

import time
from collections.abc import Iterable

from api.core.errors import ValidationFailed
from spark_jobs.public import EgressPolicy, EgressRefused


class EgressDenied(ValidationFailed):
    """An address the egress policy refuses, named by its field."""

    code, title = "egress-denied", "The address is not one Inlet may connect to"

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}", errors=[{"field": field, "message": message, "type": "egress_denied"}])


class Checks:
    """The definition-time checks of one request, sharing one lookup budget."""

    def __init__(self, policy: EgressPolicy) -> None:
        self.policy = policy
        self._budget_s = policy.definition_lookup_s
        self._deadline = time.monotonic() + self._budget_s

    def _left(self) -> float:
        """What is left of the budget (a sliver at least, for names in /etc/hosts); 0 without one."""
        return max(0.05, self._deadline - time.monotonic()) if self._budget_s > 0 else 0.0

    def url(self, field: str, url: str) -> None:
        try:
            self.policy.check_url(url, timeout_s=self._left())
        except EgressRefused as exc:
            raise EgressDenied(field, exc.message) from None

    def hosts(self, field: str, hosts: Iterable[str]) -> None:
        """Each host of a list (``bootstrap_servers``), a refusal naming the entry's position."""
        for position, host in enumerate(hosts, start=1):
            try:
                self.policy.check_host(host, timeout_s=self._left())
            except EgressRefused as exc:
                raise EgressDenied(field, f"entry {position}: {exc.message}") from None
