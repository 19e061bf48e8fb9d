"""tenants.field_key_version: the version of the tenant's field key in the secret store (sensitive
fields' hashes, sealed quarantines); null until a pipeline first needs one

Revision ID: 0017
Revises: 0016
Create Date: 2026-12-07 15:00:00.000000
"""
from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = '0017'
down_revision: str | None = '0016'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table('tenants', schema=None) as batch_op:
        batch_op.add_column(sa.Column('field_key_version', sa.Integer(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('tenants', schema=None) as batch_op:
        batch_op.drop_column('field_key_version')
