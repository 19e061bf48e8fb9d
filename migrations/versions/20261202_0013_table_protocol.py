"""table_maintenance.protocol: the Delta table's protocol and features as the last maintenance task read them

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-02 19:50:00.000000

Not backfilled: a table's protocol appears with its next maintenance task (the scheduler's sweep sends
each table a vacuum task at least every vacuum interval, 24 h by default).
"""
from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = '0013'
down_revision: str | None = '0012'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table('table_maintenance', schema=None) as batch_op:
        batch_op.add_column(sa.Column('protocol', sa.JSON(none_as_null=True), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('table_maintenance', schema=None) as batch_op:
        batch_op.drop_column('protocol')
