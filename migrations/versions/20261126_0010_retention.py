"""retention: webhook_delivery_totals (the counts of the deliveries retention deleted, for /metrics) and
the indexes retention's batches and the list endpoints need at millions of rows (three replace older ones)

On PostgreSQL the indexes are built CONCURRENTLY, outside the migration's transaction, so an upgrade
never blocks the writes of a big runs or audit_events table while they build. If one fails (say, a
duplicate name), PostgreSQL leaves it INVALID: drop it and run the upgrade again.

Revision ID: 0010
Revises: 0009
Create Date: 2026-11-26 09:00:00
"""
from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = '0010'
down_revision: str | None = '0009'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# name, table, columns: what retention's batches scan oldest first, and the list endpoints' orders
INDEXES: tuple[tuple[str, str, list[str]], ...] = (
    ('ix_runs_tenant_pipeline_created', 'runs', ['tenant_id', 'pipeline_id', 'created_at', 'id']),
    ('ix_runs_tenant_pipeline_state', 'runs', ['tenant_id', 'pipeline_id', 'state', 'id']),
    ('ix_audit_events_resource_created', 'audit_events', ['tenant_id', 'resource_type', 'resource_id', 'created_at',
                                                          'id']),
    ('ix_runs_finished', 'runs', ['finished_at']),
    ('ix_run_log_chunks_created', 'run_log_chunks', ['created_at']),
    ('ix_audit_events_created', 'audit_events', ['created_at']),
    ('ix_webhook_events_created', 'webhook_events', ['created_at']),
    ('ix_webhook_deliveries_finished', 'webhook_deliveries', ['finished_at']),
    ('ix_idempotency_records_created', 'idempotency_records', ['created_at']),
    ('ix_partition_offsets_last_run', 'partition_offsets', ['last_run_id']),
)
# Replaced by the first three above (the runs' tenant_id one misled the planner: see api/runs/models.py).
DROPPED: tuple[tuple[str, str, list[str]], ...] = (
    ('ix_runs_pipeline_created', 'runs', ['pipeline_id', 'created_at']),
    ('ix_runs_tenant_id', 'runs', ['tenant_id']),
    ('ix_audit_events_resource', 'audit_events', ['tenant_id', 'resource_type', 'resource_id']),
)


def upgrade() -> None:
    op.create_table('webhook_delivery_totals',
    sa.Column('state', sa.String(length=16), nullable=False),
    sa.Column('event_type', sa.String(length=64), nullable=False),
    sa.Column('deliveries', sa.BigInteger(), nullable=False),
    sa.Column('attempts', sa.BigInteger(), nullable=False),
    sa.PrimaryKeyConstraint('state', 'event_type')
    )
    _swap(create=INDEXES, drop=DROPPED)


def downgrade() -> None:
    _swap(create=DROPPED, drop=INDEXES)
    op.drop_table('webhook_delivery_totals')


def _swap(*, create: Sequence[tuple[str, str, list[str]]], drop: Sequence[tuple[str, str, list[str]]]) -> None:
    """Create, then drop (so a query always has its index), without blocking writes on PostgreSQL."""
    if op.get_bind().dialect.name == 'postgresql':
        with op.get_context().autocommit_block():
            for name, table, columns in create:
                op.create_index(name, table, columns, unique=False, postgresql_concurrently=True)
            for name, table, _ in drop:
                op.drop_index(name, table_name=table, postgresql_concurrently=True)
    else:
        for name, table, columns in create:
            op.create_index(name, table, columns, unique=False)
        for name, table, _ in drop:
            op.drop_index(name, table_name=table)
