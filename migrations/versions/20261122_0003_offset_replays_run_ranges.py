"""offset replays (replace-mode replay windows), run ranges (which run wrote which offsets)

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-22 03:37:44.062337
"""
from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = '0003'
down_revision: str | None = '0002'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table('offset_replays',
    sa.Column('pipeline_id', sa.Uuid(), nullable=False),
    sa.Column('topic', sa.String(length=249), nullable=False),
    sa.Column('partition', sa.Integer(), autoincrement=False, nullable=False),
    sa.Column('tenant_id', sa.Uuid(), nullable=False),
    sa.Column('start', sa.BigInteger(), nullable=False),
    sa.Column('end', sa.BigInteger(), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['pipeline_id'], ['pipelines.id'], ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['tenant_id'], ['tenants.id'], ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('pipeline_id', 'topic', 'partition')
    )
    with op.batch_alter_table('offset_replays', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_offset_replays_tenant_id'), ['tenant_id'], unique=False)

    op.create_table('run_ranges',
    sa.Column('run_id', sa.Uuid(), nullable=False),
    sa.Column('topic', sa.String(length=249), nullable=False),
    sa.Column('partition', sa.Integer(), autoincrement=False, nullable=False),
    sa.Column('pipeline_id', sa.Uuid(), nullable=False),
    sa.Column('tenant_id', sa.Uuid(), nullable=False),
    sa.Column('start', sa.BigInteger(), nullable=False),
    sa.Column('end', sa.BigInteger(), nullable=False),
    sa.ForeignKeyConstraint(['pipeline_id'], ['pipelines.id'], ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['run_id'], ['runs.id'], ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['tenant_id'], ['tenants.id'], ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('run_id', 'topic', 'partition')
    )
    with op.batch_alter_table('run_ranges', schema=None) as batch_op:
        batch_op.create_index('ix_run_ranges_lookup', ['pipeline_id', 'topic', 'partition', 'start'], unique=False)
        batch_op.create_index(batch_op.f('ix_run_ranges_tenant_id'), ['tenant_id'], unique=False)


def downgrade() -> None:
    with op.batch_alter_table('run_ranges', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_run_ranges_tenant_id'))
        batch_op.drop_index('ix_run_ranges_lookup')

    op.drop_table('run_ranges')
    with op.batch_alter_table('offset_replays', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_offset_replays_tenant_id'))

    op.drop_table('offset_replays')
