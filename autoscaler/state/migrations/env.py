"""Alembic's entry point: runs the revisions on the connection ``autoscaler.state.db.migrate`` hands over.

The caller owns the connection and its transaction (and the lock that keeps two daemons from migrating
at once), so nothing here commits. Run from the ``alembic`` command line instead (to write a new
revision), it opens its own engine from ``sqlalchemy.url``.
"""

from __future__ import annotations

from alembic import context
from sqlalchemy.engine import Connection

from autoscaler.state.db import make_engine
from autoscaler.state.tables import VERSION_TABLE


def _run(connection: Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=None,
        version_table=VERSION_TABLE,
        render_as_batch=connection.dialect.name == "sqlite",  # SQLite's ALTER TABLE needs batch mode
        transactional_ddl=True,  # true on SQLite too: autoscaler.state.db issues its own BEGIN
    )
    with context.begin_transaction():
        context.run_migrations()


connection = context.config.attributes.get("connection")
if connection is not None:
    _run(connection)
else:
    engine = make_engine(context.config.get_main_option("sqlalchemy.url") or "")
    with engine.begin() as conn:
        _run(conn)
    engine.dispose()
