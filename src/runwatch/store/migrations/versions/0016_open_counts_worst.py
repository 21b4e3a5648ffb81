"""Each run's open findings counted again (health_state.open_info, open_warning,
open_critical), as the health store now lists them: a group of findings of one signal or
incident counts at the worst severity of its members, where it counted at its lead's (an
open info that merged a resolved warning counted as an info). Counted as 0012 counts them
(runwatch.health.store.recount_open); no column changes.

Revision ID: 0016
Revises: 0015
"""

from alembic import op

from runwatch.health.store import recount_open

revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None


def upgrade() -> None:
    recount_open(op.get_bind())


def downgrade() -> None:
    # the counts 0015 had were the lead's: counting as now is no worse
    recount_open(op.get_bind())
