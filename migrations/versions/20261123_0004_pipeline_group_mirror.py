"""pipelines.group_mirror: the outcome of mirroring committed offsets to a Kafka consumer group

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-23 06:40:00
"""
from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = '0004'
down_revision: str | None = '0003'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table('pipelines') as batch:
        batch.add_column(sa.Column('group_mirror', sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('pipelines') as batch:
        batch.drop_column('group_mirror')
