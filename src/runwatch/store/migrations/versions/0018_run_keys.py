"""The run keys: a name is a run's own within its project, and a run's pk is never reused.

A run sent over HTTP (runs.dir null) holds its name alone in its project
(ux_runs_sent_name on (project, name), where 0011 made it one across the whole index): a
token of one project could otherwise learn, by being refused, that another project has a
run of a name, and take a name another project's SDK would use later. Names unique
across the index are unique in each project, so no row changes.

On SQLite, `runs` is rebuilt with AUTOINCREMENT (its rows, pks and indexes kept; the
foreign keys of other tables name it and stay), so a run deleted (its folder gone, a
cancel of a job never started) never gives its pk to a new run: the server's series
cache, finding ids and stream cursors know a run by its pk. PostgreSQL's serial never
reuses a value.

Revision ID: 0018
Revises: 0017
"""

import sqlalchemy as sa
from alembic import op

revision = "0018"
down_revision = "0017"
branch_labels = None
depends_on = None

NAME_LENGTH = 128  # runs.name is String(128)


def _foreign_keys_on(conn: sa.Connection) -> bool:
    """Whether SQLite enforces foreign keys on `conn`: rebuilding `runs` (a copy, DROP
    TABLE runs, a rename) would then delete every row of the tables that name a run.
    runwatch.store.db upgrades with them off."""
    return bool(conn.exec_driver_sql("PRAGMA foreign_keys").scalar())


def upgrade() -> None:
    conn = op.get_bind()
    if conn.dialect.name == "sqlite" and _foreign_keys_on(conn):
        raise RuntimeError("migration 0018 rebuilds the runs table, which with foreign keys "
                           "on would delete every run's records: run it with PRAGMA "
                           "foreign_keys=OFF, as runwatch does when it opens the index")
    op.drop_index("ux_runs_sent_name", "runs")
    if conn.dialect.name == "sqlite":
        # the copy keeps every pk, and SQLite's sequence starts from the highest of them
        with op.batch_alter_table("runs", recreate="always",
                                  table_kwargs={"sqlite_autoincrement": True}):
            pass
    op.create_index("ux_runs_sent_name", "runs", ["project", "name"], unique=True,
                    sqlite_where=sa.text("dir IS NULL"), postgresql_where=sa.text("dir IS NULL"))


def downgrade() -> None:
    """Back to one name per sent run across the index: a sent run whose name a sent run
    of another project holds (the first stored keeps it) is renamed `<name>.<run id>`,
    as 0011 renamed them, so nothing is lost. On SQLite `runs` is rebuilt as 0017 had it,
    without AUTOINCREMENT, where foreign keys are off; with them on it stays as it is (a
    rebuild would delete every run's records; AUTOINCREMENT is harmless to 0017)."""
    conn = op.get_bind()
    runs = sa.table("runs", sa.column("pk", sa.Integer), sa.column("run_id", sa.String),
                    sa.column("name", sa.String), sa.column("dir", sa.Text))
    rows = conn.execute(sa.select(runs.c.pk, runs.c.run_id, runs.c.name)
                        .where(runs.c.dir.is_(None)).order_by(runs.c.pk)).all()
    taken = set(conn.execute(sa.select(runs.c.name)).scalars())
    seen: set[str] = set()
    for row in rows:
        if row.name not in seen:
            seen.add(row.name)
            continue
        name, n = "", 1
        while not name or name in taken:
            suffix = f".{row.run_id}" + (f".{n}" if n > 1 else "")
            name, n = row.name[:NAME_LENGTH - len(suffix)] + suffix, n + 1
        taken.add(name)
        seen.add(name)
        conn.execute(sa.update(runs).where(runs.c.pk == row.pk).values(name=name))
    op.drop_index("ux_runs_sent_name", "runs")
    if conn.dialect.name == "sqlite" and not _foreign_keys_on(conn):
        with op.batch_alter_table("runs", recreate="always",
                                  table_kwargs={"sqlite_autoincrement": False}):
            pass
    op.create_index("ux_runs_sent_name", "runs", ["name"], unique=True,
                    sqlite_where=sa.text("dir IS NULL"), postgresql_where=sa.text("dir IS NULL"))
