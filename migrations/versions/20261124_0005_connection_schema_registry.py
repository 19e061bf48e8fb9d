"""connections.schema_registry: a connection's schema registry (its credentials live in the secret)

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-24 09:00:00
"""
from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = '0005'
down_revision: str | None = '0004'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table('connections') as batch:
        batch.add_column(sa.Column('schema_registry', sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('connections') as batch:
        batch.drop_column('schema_registry')
