"""portal_sessions: server-side portal sign-ins (the cookie holds a random id; this table its SHA-256);
idempotency fingerprints written unkeyed are scrubbed

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-25 10:00:00
"""
from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = '0007'
down_revision: str | None = '0006'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table('portal_sessions',
    sa.Column('id_hash', sa.String(length=64), nullable=False),
    sa.Column('tenant_id', sa.Uuid(), nullable=False),
    sa.Column('api_key_id', sa.Uuid(), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('last_seen_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('expires_at', sa.DateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['api_key_id'], ['api_keys.id'], ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['tenant_id'], ['tenants.id'], ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id_hash')
    )
    with op.batch_alter_table('portal_sessions', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_portal_sessions_api_key_id'), ['api_key_id'], unique=False)
        batch_op.create_index(batch_op.f('ix_portal_sessions_expires_at'), ['expires_at'], unique=False)
        batch_op.create_index('ix_portal_sessions_last_seen_at', ['last_seen_at'], unique=False)
        batch_op.create_index(batch_op.f('ix_portal_sessions_tenant_id'), ['tenant_id'], unique=False)
    # An unkeyed SHA-256 of a body could be tested against guessed credentials: it leaves the database.
    # A retry of such a request now matches nothing and is a 422 (never a second object).
    op.execute(sa.text("UPDATE idempotency_records SET fingerprint = 'scrubbed' WHERE fingerprint NOT LIKE 'hmac:%'"))


def downgrade() -> None:
    op.drop_table('portal_sessions')
