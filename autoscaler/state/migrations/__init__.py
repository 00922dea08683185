"""Alembic migrations of the state and event tables; run by ``autoscaler.state.db.migrate`` at start-up.

To add revision NNNN (then write its upgrade/downgrade and update ``autoscaler/state/tables.py``; the
contract suite fails until the two agree):

    .venv/bin/python -c "from alembic.config import Config; from alembic import command; \
c = Config(); c.set_main_option('script_location', 'autoscaler/state/migrations'); \
command.revision(c, 'what it does', rev_id='NNNN')"
"""
