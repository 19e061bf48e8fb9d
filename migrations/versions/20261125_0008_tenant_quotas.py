"""tenant_quotas: the operator's per-tenant quota overrides; runs.claimed_at and the indexes of the
runs-per-hour quota and the workers' fair share

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-25 12:00:00
"""
from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = '0008'
down_revision: str | None = '0007'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table('tenant_quotas',
    sa.Column('tenant_id', sa.Uuid(), nullable=False),
    sa.Column('pipelines', sa.Integer(), nullable=True),
    sa.Column('connections', sa.Integer(), nullable=True),
    sa.Column('api_keys', sa.Integer(), nullable=True),
    sa.Column('webhooks', sa.Integer(), nullable=True),
    sa.Column('runs_per_hour', sa.Integer(), nullable=True),
    sa.Column('concurrent_runs', sa.Integer(), nullable=True),
    sa.Column('updated_at', sa.DateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['tenant_id'], ['tenants.id'], ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('tenant_id')
    )
    with op.batch_alter_table('runs', schema=None) as batch_op:
        batch_op.add_column(sa.Column('claimed_at', sa.DateTime(timezone=True), nullable=True))
        batch_op.create_index('ix_runs_tenant_created', ['tenant_id', 'created_at'], unique=False)
        batch_op.create_index('ix_runs_tenant_claimed', ['tenant_id', 'claimed_at'], unique=False)


def downgrade() -> None:
    with op.batch_alter_table('runs', schema=None) as batch_op:
        batch_op.drop_index('ix_runs_tenant_claimed')
        batch_op.drop_index('ix_runs_tenant_created')
        batch_op.drop_column('claimed_at')
    op.drop_table('tenant_quotas')
