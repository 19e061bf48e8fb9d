"""tenant_quotas.continuous_pipelines: the operator's override of how many active continuous pipelines
a tenant may have

Revision ID: 0015
Revises: 0014
Create Date: 2026-12-04 22:40:00.000000
"""
from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = '0015'
down_revision: str | None = '0014'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table('tenant_quotas', schema=None) as batch_op:
        batch_op.add_column(sa.Column('continuous_pipelines', sa.Integer(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('tenant_quotas', schema=None) as batch_op:
        batch_op.drop_column('continuous_pipelines')
