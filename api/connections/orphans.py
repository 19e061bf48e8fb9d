"""The orphan sweep: destroy every secret under ``tenants/`` that no connection or webhook refers to
(a tenant's field key is its tenant's: ``api.tenancy.field_keys``).

A request that writes a secret (a connection's credentials, a webhook's signing secret) and then
fails compensates by destroying it, and a delete destroys its secret after the commit; both can lose
a race (Vault stalls, the compensating destroy arrives before the delayed write) or fail outright
(Vault down at that moment). So the guarantee that no secret outlives its owner is kept here, not in
the request: the scheduler sweeps at start-up and every ``secret_sweep_interval_s``, and ``inlet
secrets sweep`` runs it on demand.

A secret is an orphan when no connection or webhook row names its path. A create in flight has written
its secret but not yet committed its row, so a secret changed within ``grace_s`` is never destroyed.
A secret under a tenant this database does not know is left alone: it may belong to another Inlet
deployment sharing the mount and prefix, or the scheduler may be pointed at the wrong database.
Every destroy is logged by path (paths hold ids, never secret values).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import timedelta

from sqlmodel import Session, col, select

from api.connections.models import Connection
from api.core.db import utcnow
from api.secrets.store import CONNECTIONS_ROOT, SecretStore, field_key_path
from api.tenancy.models import Tenant
from api.webhooks.models import Webhook

log = logging.getLogger(__name__)

_OWNERS = {"connections": "connection", "webhooks": "webhook"}


def _owner_of(path: str) -> str:
    """What kind of row a secret belongs to, by its folder (``tenants/<tenant>/<folder>/<id>``)."""
    parts = path.split("/")
    return _OWNERS.get(parts[2] if len(parts) > 2 else "", "row")


@dataclass
class SweepReport:
    checked: int = 0
    destroyed: list[str] = field(default_factory=list)
    too_young: list[str] = field(default_factory=list)  # orphans for now, left to the next sweep
    foreign: list[str] = field(default_factory=list)  # under a tenant this database does not know


def sweep_orphaned_secrets(*, session: Session, secrets: SecretStore, grace_s: float, dry_run: bool = False) -> SweepReport:
    """Destroy (or with ``dry_run`` only list) the secrets no connection or webhook refers to."""
    report = SweepReport()
    stored = secrets.list_paths(CONNECTIONS_ROOT)
    # Read after the listing: a row committed in between is seen, so its secret is kept.
    referenced = {path for owner in (Connection, Webhook)
                  for path in session.exec(select(owner.secret_path).where(col(owner.secret_path).is_not(None))).all()}
    referenced |= {field_key_path(tenant) for tenant in session.exec(
        select(Tenant.id).where(col(Tenant.field_key_version).is_not(None))).all()}
    tenants = {str(t) for t in session.exec(select(Tenant.id)).all()}
    cutoff = utcnow() - timedelta(seconds=grace_s)
    for path in stored:
        report.checked += 1
        if path in referenced:
            continue
        if path.split("/")[1] not in tenants:
            report.foreign.append(path)
            continue
        described = secrets.describe(path)
        if described is None:
            continue  # destroyed meanwhile
        if described.updated_at > cutoff:
            report.too_young.append(path)
            continue
        if dry_run:
            report.destroyed.append(path)
            continue
        secrets.destroy(path)
        report.destroyed.append(path)
        log.warning("orphaned secret at %s destroyed: no %s refers to it", path, _owner_of(path))
    if report.foreign:
        log.warning("secret sweep left %d secret(s) alone under tenants this database does not know, e.g. %s",
                    len(report.foreign), report.foreign[0])
    return report
