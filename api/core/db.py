"""Database plumbing: the engine, a UTC timestamp type, and the per-request unit of work.

The edge owns the transaction: ``unit_of_work`` commits on success and rolls back on error;
services only flush. Work that must follow a commit or undo an outside effect after a rollback
(a secret written to Vault, say) registers itself with ``after_commit`` / ``on_rollback``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Connection, CursorResult, DateTime, Engine, Executable, event
from sqlalchemy.types import TypeDecorator
from sqlmodel import Session, create_engine

log = logging.getLogger(__name__)


def utcnow() -> datetime:
    return datetime.now(UTC)


class UTCDateTime(TypeDecorator[datetime]):
    """A timezone-aware UTC timestamp on every backend (SQLite keeps no zone)."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: object) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError("naive datetimes are not stored; use an aware UTC datetime")
        return value.astimezone(UTC)

    def process_result_value(self, value: datetime | None, dialect: object) -> datetime | None:
        if value is None:
            return None
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def make_engine(url: str) -> Engine:
    if url.startswith("sqlite"):
        engine = create_engine(url, connect_args={"check_same_thread": False, "timeout": 30})

        @event.listens_for(engine, "connect")
        def _sqlite_pragmas(dbapi_conn: Any, _record: object) -> None:
            # pysqlite's own transaction handling breaks SAVEPOINTs; SQLAlchemy's documented fix is
            # to turn it off and emit BEGIN ourselves.
            dbapi_conn.isolation_level = None
            cursor = dbapi_conn.cursor()
            cursor.execute("PRAGMA foreign_keys=ON")
            cursor.execute("PRAGMA journal_mode=WAL")
            cursor.execute("PRAGMA busy_timeout=30000")
            cursor.close()

        @event.listens_for(engine, "begin")
        def _begin_immediate(conn: Connection) -> None:
            # Take the write lock up front: a deferred transaction that reads and then writes fails
            # at once under concurrency instead of waiting for the lock.
            conn.exec_driver_sql("BEGIN IMMEDIATE")

        return engine
    return create_engine(url, pool_pre_ping=True, pool_size=10, max_overflow=20)


def rows_changed(session: Session, statement: Executable) -> int:
    """Execute an UPDATE or DELETE and say how many rows it changed (the compare-and-set's answer)."""
    result: CursorResult[Any] = session.execute(statement)  # type: ignore[assignment]  # DML returns a CursorResult; the stubs say Result
    return result.rowcount


def after_commit(session: Session, action: Callable[[], object]) -> None:
    """Run ``action`` once the unit of work has committed (e.g. destroy a deleted secret)."""
    session.info.setdefault("after_commit", []).append(action)


def on_rollback(session: Session, action: Callable[[], None]) -> None:
    """Run ``action`` if the unit of work does not commit (compensate an outside write)."""
    session.info.setdefault("on_rollback", []).append(action)


def _run_all(session: Session, key: str) -> None:
    for action in session.info.pop(key, []):
        try:
            action()
        except Exception:  # a failed follow-up must not mask the outcome; it is logged
            log.exception("%s action failed", key)


@contextmanager
def unit_of_work(db: Engine) -> Iterator[Session]:
    """One transaction: commit when the block succeeds, roll back (and compensate) when it fails."""
    session = Session(db, expire_on_commit=False)
    try:
        yield session
        session.commit()
    except BaseException:
        session.rollback()
        session.info.pop("after_commit", None)
        _run_all(session, "on_rollback")
        raise
    else:
        session.info.pop("on_rollback", None)
        _run_all(session, "after_commit")
    finally:
        session.close()
