"""usage_hours and usage_totals: the usage ledger (api.usage), per tenant, pipeline and hour, and
per tenant and pipeline since it began; no foreign key to pipelines, so a deleted pipeline's usage stays

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-25 15:00:00
"""
from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = '0009'
down_revision: str | None = '0008'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_COUNTERS = ('records_read', 'rows_written', 'rows_quarantined', 'bytes_read', 'bytes_written', 'wall_ms',
             'engine_ms', 'runs_succeeded', 'runs_failed', 'runs_retried', 'runs_cancelled', 'runs_skipped')
_DURATIONS = ('attempts_le_10s', 'attempts_le_30s', 'attempts_le_60s', 'attempts_le_120s', 'attempts_le_300s',
              'attempts_le_900s', 'attempts_le_3600s')


def _counters(names: Sequence[str]) -> list[sa.Column]:  # type: ignore[type-arg]
    return [sa.Column(name, sa.BigInteger(), nullable=False) for name in names]


def upgrade() -> None:
    op.create_table('usage_hours',
    *_counters(_COUNTERS),
    sa.Column('tenant_id', sa.Uuid(), nullable=False),
    sa.Column('pipeline_id', sa.Uuid(), nullable=False),
    sa.Column('hour', sa.DateTime(timezone=True), nullable=False),
    sa.Column('day', sa.DateTime(timezone=True), nullable=False),
    sa.Column('pipeline_name', sa.String(length=100), nullable=False),
    sa.ForeignKeyConstraint(['tenant_id'], ['tenants.id'], ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('tenant_id', 'pipeline_id', 'hour')
    )
    with op.batch_alter_table('usage_hours', schema=None) as batch_op:
        batch_op.create_index('ix_usage_hours_tenant_hour', ['tenant_id', 'hour'], unique=False)
    op.create_table('usage_totals',
    *_counters(_COUNTERS),
    sa.Column('tenant_id', sa.Uuid(), nullable=False),
    sa.Column('pipeline_id', sa.Uuid(), nullable=False),
    sa.Column('pipeline_name', sa.String(length=100), nullable=False),
    *_counters(_DURATIONS),
    sa.ForeignKeyConstraint(['tenant_id'], ['tenants.id'], ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('tenant_id', 'pipeline_id')
    )


def downgrade() -> None:
    op.drop_table('usage_totals')
    with op.batch_alter_table('usage_hours', schema=None) as batch_op:
        batch_op.drop_index('ix_usage_hours_tenant_hour')
    op.drop_table('usage_hours')
