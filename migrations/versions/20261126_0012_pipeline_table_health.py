"""pipelines.table_health: the Delta table's health as last recorded, for the pipeline's read

Revision ID: 0012
Revises: 0011
Create Date: 2026-11-26 09:30:00.000000

Not backfilled: a pipeline's table health appears with its next run's commit or maintenance task (the
scheduler's sweep sends each table a vacuum task at least every vacuum interval, 24 h by default).
"""
from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = '0012'
down_revision: str | None = '0011'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table('pipelines', schema=None) as batch_op:
        batch_op.add_column(sa.Column('table_health', sa.JSON(none_as_null=True), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('pipelines', schema=None) as batch_op:
        batch_op.drop_column('table_health')
