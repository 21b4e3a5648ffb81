"""A run sent over HTTP (runs.dir null) holds its name alone (ux_runs_sent_name), so that
`POST /api/ingest` cannot make a second run under a name taken, even when two ingests race.

An index written before may hold such runs under one name already: the first stored keeps
it, and each other one is renamed `<name>.<run id>` (a name no run can have taken, since
run ids are unique), so nothing is lost and every run can be named again.

Revision ID: 0011
Revises: 0010
"""

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None

NAME_LENGTH = 128  # runs.name is String(128)


def upgrade() -> None:
    conn = op.get_bind()
    runs = sa.table("runs", sa.column("pk", sa.Integer), sa.column("run_id", sa.String),
                    sa.column("name", sa.String), sa.column("dir", sa.Text))
    sent = sa.select(runs.c.pk, runs.c.run_id, runs.c.name).where(runs.c.dir.is_(None))
    rows = conn.execute(sent.order_by(runs.c.pk)).all()
    # every name a run holds (sent or a folder's), so a new one is none of them (a run may
    # be named `<name>.<run id>` already)
    taken = set(conn.execute(sa.select(runs.c.name)).scalars())
    seen: set[str] = set()
    for row in rows:
        if row.name not in seen:
            seen.add(row.name)
            continue
        name, n = "", 1
        while not name or name in taken:  # taken by a name as it was: a count makes it new
            suffix = f".{row.run_id}" + (f".{n}" if n > 1 else "")
            name, n = row.name[:NAME_LENGTH - len(suffix)] + suffix, n + 1
        taken.add(name)
        seen.add(name)
        conn.execute(sa.update(runs).where(runs.c.pk == row.pk).values(name=name))
    op.create_index("ux_runs_sent_name", "runs", ["name"], unique=True,
                    sqlite_where=sa.text("dir IS NULL"), postgresql_where=sa.text("dir IS NULL"))


def downgrade() -> None:
    op.drop_index("ux_runs_sent_name", "runs")
