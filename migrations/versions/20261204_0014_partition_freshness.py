"""partition_offsets.newest_record_at: the Kafka timestamp of the newest record each partition committed;
pipelines.newest_record_at: the oldest of those, its pipeline's freshness as the last commit left it

Revision ID: 0014
Revises: 0013
Create Date: 2026-12-04 19:40:00.000000

Not backfilled: a partition's newest record time appears with its next run.
"""
from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = '0014'
down_revision: str | None = '0013'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table('partition_offsets', schema=None) as batch_op:
        batch_op.add_column(sa.Column('newest_record_at', sa.DateTime(timezone=True), nullable=True))
    with op.batch_alter_table('pipelines', schema=None) as batch_op:
        batch_op.add_column(sa.Column('newest_record_at', sa.DateTime(timezone=True), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('pipelines', schema=None) as batch_op:
        batch_op.drop_column('newest_record_at')
    with op.batch_alter_table('partition_offsets', schema=None) as batch_op:
        batch_op.drop_column('newest_record_at')
