"""A tenant's field key: the secret its pipelines' sensitive fields are hashed with and their
quarantines sealed with (``contract.sensitive``; ``spark_jobs.contract.sensitive``). One per tenant, so
that a value hashes the same in each of its pipelines and differently in another tenant's.

It lives in the secret store (``tenants/<tenant>/field-key``), never in the database: the tenants table
keeps only the version every run reads. It is made the first time a run needs it, and recorded by
compare-and-set on that version: of two runs starting at once, each writes a key and both read the
one recorded first; a key written by a run that then failed is superseded by the next write. It
lives as long as its tenant (the orphan sweep keeps it: ``api.connections.orphans``).
"""

from __future__ import annotations

import logging
import uuid

from sqlalchemy import update
from sqlmodel import Session, col, select

from api.core.db import rows_changed
from api.secrets.store import SecretStore, field_key_path
from api.tenancy.models import Tenant
from spark_jobs.public import new_field_key

log = logging.getLogger(__name__)


def has_field_key(session: Session, tenant_id: uuid.UUID) -> bool:
    """Whether the tenant has a field key (a run of its made one)."""
    return session.exec(select(Tenant.field_key_version).where(Tenant.id == tenant_id)).one() is not None


def field_key(session: Session, tenant_id: uuid.UUID, secrets: SecretStore) -> str:
    """The tenant's field key (base64), made now if it has none yet."""
    version = session.exec(select(Tenant.field_key_version).where(Tenant.id == tenant_id)).one()
    if version is None:
        written = secrets.write(field_key_path(tenant_id), {"key": new_field_key()})
        if rows_changed(session, update(Tenant).where(col(Tenant.id) == tenant_id, col(Tenant.field_key_version).is_(None))
                        .values(field_key_version=written)):
            log.info("field key of tenant %s made (version %d)", tenant_id, written)
        session.expire_all()
        version = session.exec(select(Tenant.field_key_version).where(Tenant.id == tenant_id)).one()
        assert version is not None  # ours, or the one a concurrent run recorded first
    key = secrets.read(field_key_path(tenant_id), version=version)["key"]
    assert isinstance(key, str)
    return key
