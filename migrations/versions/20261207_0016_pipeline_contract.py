"""pipelines.contract: a pipeline's data contract as written (its expectations; null: none), and the usage
ledger's rows_violating: rows that broke at least one expectation

Revision ID: 0016
Revises: 0015
Create Date: 2026-12-07 14:30:00.000000
"""
from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = '0016'
down_revision: str | None = '0015'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table('pipelines', schema=None) as batch_op:
        batch_op.add_column(sa.Column('contract', sa.JSON(), nullable=True))
    for table in ('usage_hours', 'usage_totals'):
        with op.batch_alter_table(table, schema=None) as batch_op:
            batch_op.add_column(sa.Column('rows_violating', sa.BigInteger(), server_default='0', nullable=False))


def downgrade() -> None:
    for table in ('usage_hours', 'usage_totals'):
        with op.batch_alter_table(table, schema=None) as batch_op:
            batch_op.drop_column('rows_violating')
    with op.batch_alter_table('pipelines', schema=None) as batch_op:
        batch_op.drop_column('contract')
