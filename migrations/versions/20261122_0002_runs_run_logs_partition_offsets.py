"""runs, run logs, partition offsets

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-22 03:21:13.453866
"""
from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = '0002'
down_revision: str | None = '0001'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:

    op.create_table('partition_offsets',
    sa.Column('pipeline_id', sa.Uuid(), nullable=False),
    sa.Column('topic', sa.String(length=249), nullable=False),
    sa.Column('partition', sa.Integer(), autoincrement=False, nullable=False),
    sa.Column('tenant_id', sa.Uuid(), nullable=False),
    sa.Column('committed', sa.BigInteger(), nullable=False),
    sa.Column('last_run_id', sa.Uuid(), nullable=True),
    sa.Column('updated_at', sa.DateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['pipeline_id'], ['pipelines.id'], ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['tenant_id'], ['tenants.id'], ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('pipeline_id', 'topic', 'partition')
    )
    with op.batch_alter_table('partition_offsets', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_partition_offsets_tenant_id'), ['tenant_id'], unique=False)

    op.create_table('runs',
    sa.Column('id', sa.Uuid(), nullable=False),
    sa.Column('tenant_id', sa.Uuid(), nullable=False),
    sa.Column('pipeline_id', sa.Uuid(), nullable=False),
    sa.Column('seq', sa.Integer(), nullable=False),
    sa.Column('state', sa.String(length=16), nullable=False),
    sa.Column('trigger', sa.String(length=16), nullable=False),
    sa.Column('scheduled_for', sa.DateTime(timezone=True), nullable=True),
    sa.Column('plan', sa.JSON(), nullable=True),
    sa.Column('replace_ranges', sa.JSON(), nullable=True),
    sa.Column('source_credentials_version', sa.Integer(), nullable=True),
    sa.Column('target_credentials_version', sa.Integer(), nullable=True),
    sa.Column('attempt', sa.Integer(), nullable=False),
    sa.Column('not_before', sa.DateTime(timezone=True), nullable=True),
    sa.Column('dispatched_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('lease_expires_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('worker', sa.String(length=128), nullable=True),
    sa.Column('cancel_requested', sa.Boolean(), nullable=False),
    sa.Column('result', sa.JSON(), nullable=True),
    sa.Column('rows_written', sa.BigInteger(), nullable=True),
    sa.Column('rows_quarantined', sa.BigInteger(), nullable=True),
    sa.Column('records_read', sa.BigInteger(), nullable=True),
    sa.Column('bytes_read', sa.BigInteger(), nullable=True),
    sa.Column('delta_version', sa.BigInteger(), nullable=True),
    sa.Column('error', sa.JSON(), nullable=True),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('started_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('finished_at', sa.DateTime(timezone=True), nullable=True),
    sa.ForeignKeyConstraint(['pipeline_id'], ['pipelines.id'], ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['tenant_id'], ['tenants.id'], ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id'),
    sa.UniqueConstraint('pipeline_id', 'seq', name='uq_runs_pipeline_seq')
    )
    with op.batch_alter_table('runs', schema=None) as batch_op:
        batch_op.create_index('ix_runs_pipeline_created', ['pipeline_id', 'created_at'], unique=False)
        batch_op.create_index('ix_runs_state_lease', ['state', 'lease_expires_at'], unique=False)
        batch_op.create_index(batch_op.f('ix_runs_tenant_id'), ['tenant_id'], unique=False)
        batch_op.create_index('uq_runs_one_active', ['pipeline_id'], unique=True, postgresql_where=sa.text("state IN ('queued', 'running')"), sqlite_where=sa.text("state IN ('queued', 'running')"))
        batch_op.create_index('uq_runs_slot', ['pipeline_id', 'scheduled_for'], unique=True, postgresql_where=sa.text('scheduled_for IS NOT NULL'), sqlite_where=sa.text('scheduled_for IS NOT NULL'))

    op.create_table('run_log_chunks',
    sa.Column('run_id', sa.Uuid(), nullable=False),
    sa.Column('chunk', sa.BigInteger(), autoincrement=False, nullable=False),
    sa.Column('text', sa.Text(), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['run_id'], ['runs.id'], ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('run_id', 'chunk')
    )
    with op.batch_alter_table('pipelines', schema=None) as batch_op:
        batch_op.add_column(sa.Column('last_run_seq', sa.Integer(), nullable=False, server_default='0'))
        batch_op.add_column(sa.Column('observed_lag', sa.BigInteger(), nullable=True))
        batch_op.add_column(sa.Column('observed_at', sa.DateTime(timezone=True), nullable=True))




def downgrade() -> None:

    with op.batch_alter_table('pipelines', schema=None) as batch_op:
        batch_op.drop_column('observed_at')
        batch_op.drop_column('observed_lag')
        batch_op.drop_column('last_run_seq')

    op.drop_table('run_log_chunks')
    with op.batch_alter_table('runs', schema=None) as batch_op:
        batch_op.drop_index('uq_runs_slot', postgresql_where=sa.text('scheduled_for IS NOT NULL'), sqlite_where=sa.text('scheduled_for IS NOT NULL'))
        batch_op.drop_index('uq_runs_one_active', postgresql_where=sa.text("state IN ('queued', 'running')"), sqlite_where=sa.text("state IN ('queued', 'running')"))
        batch_op.drop_index(batch_op.f('ix_runs_tenant_id'))
        batch_op.drop_index('ix_runs_state_lease')
        batch_op.drop_index('ix_runs_pipeline_created')

    op.drop_table('runs')
    with op.batch_alter_table('partition_offsets', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_partition_offsets_tenant_id'))

    op.drop_table('partition_offsets')

