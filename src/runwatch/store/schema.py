"""The index's tables (SQLAlchemy Core), portable between SQLite and PostgreSQL.

Runs are keyed by a small integer `pk`. Every record table carries (run_pk, seq) from
its file, the idempotency key; metric points carry it folded into one integer id
(key_id, which names the run, and seq: see runwatch.store.points).
"""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    Boolean,
    Column,
    Float,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Table,
    Text,
    UniqueConstraint,
)

metadata = MetaData()

runs = Table(
    "runs",
    metadata,
    Column("pk", Integer, primary_key=True, autoincrement=True),
    Column("run_id", String(64), nullable=False, unique=True),
    Column("name", String(128), nullable=False),
    Column("project", String(128), nullable=False, default="default"),
    Column("group_name", String(256)),
    Column("tags", Text, nullable=False, default="[]"),
    Column("method", String(32)),
    Column("base_model", Text),
    Column("dataset", Text),
    Column("trainer", String(128)),
    Column("backend", String(128)),
    Column("created_at", Float, nullable=False),
    Column("started_at", Float),
    Column("ended_at", Float),
    Column("updated_at", Float),
    Column("status", String(32), nullable=False, default="QUEUED"),
    Column("stage", Text),
    Column("progress_done", BigInteger),
    Column("progress_total", BigInteger),
    Column("reason", Text),
    # the failure catalogue's id of `reason` (runwatch.jobs.failures), when it has one
    Column("reason_code", String(64)),
    # the run's current attempt (1 until a retry or requeue starts another)
    Column("attempt", Integer, nullable=False, server_default="1"),
    Column("observed_step", BigInteger),
    Column("saved_step", BigInteger),
    Column("dir", Text),
    Column("manifest", Text, nullable=False, default="{}"),
    Column("config", Text),
    Column("engine_config", Text),
    Column("problems", Integer, nullable=False, default=0),
    Index("ix_runs_created", "created_at"),
    Index("ix_runs_name", "name"),
    # pks are never reused (SQLite would reuse the highest after a delete; 0018): the
    # server's series cache, finding ids and stream cursors know a run by its pk, and a
    # forgotten run's must not serve a new one
    sqlite_autoincrement=True,
)

metric_keys = Table(
    "metric_keys",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("run_pk", Integer, ForeignKey("runs.pk", ondelete="CASCADE"), nullable=False),
    Column("key", String(256), nullable=False),
    Column("points", BigInteger, nullable=False, default=0),
    Column("last_step", BigInteger),
    Column("last_value", Float),
    UniqueConstraint("run_pk", "key", name="uq_metric_keys_run_key"),
    # ids are never reused (SQLite would reuse the highest after a delete): a new
    # attempt's keys must not take ids whose series a server still holds in its cache
    sqlite_autoincrement=True,
)

# Long form: one row per point. `id` is key_id * 2**36 + seq (runwatch.store.points), so a
# key's points are one range of the primary key, in seq order; in SQLite the id is the
# rowid, the cheapest key to insert by. A NULL value is NaN (SQLite cannot store NaN).
metric_points = Table(
    "metric_points",
    metadata,
    # INTEGER (not BIGINT) in SQLite, where only "INTEGER PRIMARY KEY" is the rowid
    Column("id", BigInteger().with_variant(Integer, "sqlite"), primary_key=True,
           autoincrement=False),
    Column("step", BigInteger, nullable=False),
    Column("ts", Float, nullable=False),
    Column("value", Float),
    # No index on step: a series is read whole by its id range, and a second index
    # would halve the ingest rate.
)

events = Table(
    "events",
    metadata,
    Column("run_pk", Integer, primary_key=True),
    Column("seq", BigInteger, primary_key=True),
    Column("ts", Float, nullable=False),
    Column("phase", String(32), nullable=False),
    Column("stage", Text),
    Column("done", BigInteger),
    Column("total", BigInteger),
    Column("reason", Text),
    Column("attempt", Integer),
    Column("code", String(64)),
    # the rate per device-hour the worker started the attempt at (its PREPARING; 0014)
    Column("hourly_rate", Float),
)

checkpoints = Table(
    "checkpoints",
    metadata,
    Column("run_pk", Integer, primary_key=True),
    Column("seq", BigInteger, primary_key=True),
    Column("ts", Float, nullable=False),
    Column("step", BigInteger, nullable=False),
    Column("kind", String(16), nullable=False),
    Column("ckpt_id", Text, nullable=False),
    Column("path", Text),
    Column("data", Text),
)

logs = Table(
    "logs",
    metadata,
    Column("run_pk", Integer, primary_key=True),
    Column("seq", BigInteger, primary_key=True),
    Column("ts", Float, nullable=False),
    Column("level", String(16), nullable=False),
    Column("message", Text, nullable=False),
    Column("data", Text),
)

samples = Table(
    "samples",
    metadata,
    Column("run_pk", Integer, primary_key=True),
    Column("file", String(256), primary_key=True),
    Column("idx", Integer, primary_key=True),
    Column("step", BigInteger, nullable=False),
    Column("split", String(16), nullable=False),
    Column("kind", String(64), nullable=False),
    Column("reward", Float),
    Column("advantage", Float),
    Column("group_id", Integer),
    Column("truncated", Boolean),
    Column("prompt", Text),
    Column("completion", Text),
    Column("data", Text, nullable=False),
    Index("ix_samples_step", "run_pk", "split", "step"),
)

# The size and sha256 of each whole file a sender posted to /api/ingest, as it was stored
# (migration 0020; runwatch.ingest.wholefiles): GET /api/ingest answers them, so a sender
# whose file the server holds another version of (its database restored from a backup)
# sends it again. A file stored before 0020 has no row.
whole_file_hashes = Table(
    "whole_file_hashes",
    metadata,
    Column("run_pk", Integer, ForeignKey("runs.pk", ondelete="CASCADE"), primary_key=True),
    Column("file", String(256), primary_key=True),
    Column("size", BigInteger, nullable=False),
    Column("sha256", String(64), nullable=False),
)

# Where the indexer stopped in each file: byte offset and line count for JSONL files,
# size and mtime for whole-file records (samples, manifest, config).
ingest_offsets = Table(
    "ingest_offsets",
    metadata,
    Column("run_pk", Integer, primary_key=True),
    Column("file", String(256), primary_key=True),
    Column("offset", BigInteger, nullable=False, default=0),
    Column("line_no", BigInteger, nullable=False, default=0),
    Column("last_seq", BigInteger, nullable=False, default=-1),
    Column("mtime", Float),
    Column("bad_lines", Integer, nullable=False, default=0),
    Column("last_error", Text),
)

# Problems met while indexing (bad lines, foreign files), shown by `runs get`.
ingest_problems = Table(
    "ingest_problems",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("run_pk", Integer),
    Column("path", Text, nullable=False),
    Column("line_no", BigInteger),
    Column("message", Text, nullable=False),
    Column("ts", Float, nullable=False),
)

# The runs folders the index was indexed from (migration 0019), by their path as the
# indexer resolves it (ingest/gone.base_of): a run gone from one is looked for in the
# others, also those no run is indexed from yet, and a pass that finds a runs folder on
# another device than at the index's last pass over it (a disk unmounted or mounted)
# forgets nothing (ingest/forget.py). A pass writes its row only when `dev` changed, or
# `passed_at` is older than forget.PASSED_AT_S.
runs_folders = Table(
    "runs_folders",
    metadata,
    # sha256 (hex) of the path's bytes (ingest/forget.path_key; migration 0021): PostgreSQL
    # cannot key a path over about 2.7 KB itself
    Column("path_key", String(64), primary_key=True),
    Column("path", Text, nullable=False),
    # st_dev at the last pass, as a signed 64-bit value (forget.device_value)
    Column("dev", BigInteger, nullable=False),
    Column("passed_at", Float, nullable=False),
)

findings = Table(
    "findings",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("run_pk", Integer, ForeignKey("runs.pk", ondelete="CASCADE"), nullable=False),
    Column("rule_id", String(128), nullable=False),
    Column("severity", String(16), nullable=False),
    Column("status", String(16), nullable=False),
    Column("first_step", BigInteger),
    Column("last_step", BigInteger),
    Column("evidence", Text, nullable=False, default="{}"),
    Column("message", Text, nullable=False),
    Column("advice", Text, nullable=False),
    Column("opened_ts", Float, nullable=False),
    Column("updated_ts", Float, nullable=False),
    Index("ix_findings_run", "run_pk", "status"),
)

# A run's health: its engine's state, the highest seq evaluated, and its open findings by
# severity as they are listed (one per incident), counted where findings are written so
# that /metrics sums them (runwatch.health.store.save, open_by_severity).
health_state = Table(
    "health_state",
    metadata,
    Column("run_pk", Integer, primary_key=True),
    Column("state", Text, nullable=False),
    Column("last_seq", BigInteger, nullable=False, default=-1),
    Column("open_info", Integer, nullable=False, server_default="0"),
    Column("open_warning", Integer, nullable=False, server_default="0"),
    Column("open_critical", Integer, nullable=False, server_default="0"),
)

# Per-project overrides of the health rules' thresholds (YAML-validated, stored as JSON).
health_thresholds = Table(
    "health_thresholds",
    metadata,
    Column("project", String(128), primary_key=True),
    Column("overrides", Text, nullable=False),
    Column("updated_ts", Float, nullable=False),
)

# The queue's claim state (runwatch.store.jobs). The spec fields come from the run's
# job.json (the indexer writes them); the claim fields are the workers' own: the folder
# holds no claim state.
jobs = Table(
    "jobs",
    metadata,
    Column("run_pk", Integer, ForeignKey("runs.pk", ondelete="CASCADE"), primary_key=True),
    Column("kind", String(16), nullable=False),
    Column("recipe", String(16)),
    Column("argv", Text, nullable=False),  # a JSON list
    Column("cwd", Text, nullable=False),
    Column("devices", Integer, nullable=False, default=1),
    Column("device_profile", String(64), nullable=False),
    Column("priority", Integer, nullable=False, default=0),
    Column("max_attempts", Integer, nullable=False, default=1),
    Column("startup_timeout_s", Float),
    Column("submitted_at", Float, nullable=False),
    Column("attempt", Integer, nullable=False, default=1),
    Column("worker_id", String(64)),
    Column("claimed_at", Float),
    Column("heartbeat_at", Float),
    Column("pid", Integer),
    Column("cancel_requested_at", Float),
    Index("ix_jobs_worker", "worker_id"),
)

workers = Table(
    "workers",
    metadata,
    Column("id", String(64), primary_key=True),
    Column("host", String(256), nullable=False),
    Column("pid", Integer, nullable=False),
    Column("devices", Integer, nullable=False),
    Column("device_profile", String(64), nullable=False),
    Column("started_at", Float, nullable=False),
    Column("heartbeat_at", Float, nullable=False),
    Column("draining", Boolean, nullable=False, default=False),
    Column("stopped_at", Float),
    # what runs its jobs (runwatch.jobs.executors: local, ray): which workers can reap them
    Column("executor", String(16), nullable=False, server_default="local"),
    # how long it may go without a heartbeat before it is lost (runwatch.store.jobs.lost)
    Column("heartbeat_timeout_s", Float, nullable=False, server_default="30"),
    # the absolute runs folder whose jobs it claims (null: registered before 0013)
    Column("runs_dir", Text),
    # its profile's rate per device-hour when it registered, which prices its uptime
    # (null: registered before 0014, or its profiles could not be read)
    Column("hourly_rate", Float),
    # why it cannot start jobs now, as its executor last found (a Ray cluster that does
    # not answer); null when it can (0015)
    Column("unavailable", Text),
    # when job control last let go of a job it held (runwatch.jobs.reaper.conclude): a lost
    # or stopped worker's spend runs until then (0017)
    Column("released_at", Float),
)

# --- H5: step summaries (runwatch.store.summaries) ---
# A metric key's points reduced to buckets of 2**level steps (bucket = step >> level):
# count, min, max and the last point (step, seq, wall time, value) of each bucket. Only
# closed buckets are stored (a later point lies beyond them), written as points arrive,
# so a whole series is read from a few thousand rows instead of every point. A NULL
# min/max/last is NaN (every point of the bucket NaN, or the last one).
metric_summaries = Table(
    "metric_summaries",
    metadata,
    Column("key_id", Integer, ForeignKey("metric_keys.id", ondelete="CASCADE"),
           primary_key=True),
    Column("level", Integer, primary_key=True),
    Column("bucket", BigInteger, primary_key=True),
    Column("n", BigInteger, nullable=False),
    Column("last_step", BigInteger, nullable=False),
    Column("last_seq", BigInteger, nullable=False),
    Column("last_ts", Float, nullable=False),
    Column("min", Float),
    Column("max", Float),
    Column("last", Float),
    sqlite_with_rowid=False,
)

# Where each summarised key stands: buckets of `base` (the finest level) and above are
# stored for every step below `frontier`; `last_seq` is the seq of the last point below
# it, `first_step` the series' first step. A key without a row is not summarised.
metric_summary_state = Table(
    "metric_summary_state",
    metadata,
    Column("key_id", Integer, ForeignKey("metric_keys.id", ondelete="CASCADE"),
           primary_key=True),
    Column("base", Integer, nullable=False),
    Column("frontier", BigInteger, nullable=False),
    Column("last_seq", BigInteger, nullable=False),
    Column("first_step", BigInteger, nullable=False),
    # the least, greatest and sum of the finite values below the frontier (run tiles)
    Column("fin_min", Float),
    Column("fin_max", Float),
    Column("fin_sum", Float, nullable=False),
)

# The buckets of a closed chunk of a level (2**CHUNK_BITS buckets: bucket >> CHUNK_BITS ==
# chunk) packed in one row, as runwatch.store.summaries lays them out; the open chunk's
# buckets are rows of metric_summaries until it closes. A whole series is a few rows.
metric_summary_packs = Table(
    "metric_summary_packs",
    metadata,
    Column("key_id", Integer, ForeignKey("metric_keys.id", ondelete="CASCADE"),
           primary_key=True),
    Column("level", Integer, primary_key=True),
    Column("chunk", BigInteger, primary_key=True),
    Column("data", LargeBinary, nullable=False),
    sqlite_with_rowid=False,
)

# --- H6: projects and API tokens (runwatch.store.tokens) ---
# Projects made with `runwatch projects create`; a project also exists, without a row,
# while runs name it (runs.project).
projects = Table(
    "projects",
    metadata,
    Column("name", String(128), primary_key=True),
    Column("created_by", String(128), nullable=False),
    Column("created_at", Float, nullable=False),
)

# An API token of one project: the secret is never stored, only its sha256 (hex) and its
# first characters (`hint`, so a user can tell tokens apart). `right` is read, write or admin.
api_tokens = Table(
    "api_tokens",
    metadata,
    Column("id", String(32), primary_key=True),
    Column("secret_sha256", String(64), nullable=False, unique=True),
    Column("hint", String(16), nullable=False),
    Column("name", String(128), nullable=False),
    Column("project", String(128), nullable=False),
    Column("right", String(8), nullable=False),
    Column("created_by", String(128), nullable=False),
    Column("created_at", Float, nullable=False),
    Column("last_used_at", Float),
    Column("revoked_at", Float),
    Index("ix_api_tokens_project", "project"),
)

# --- H8: run list indexes (migration 0007) ---
# A project's, a phase's or a group's runs newest first, as the run list asks for them.
Index("ix_runs_project_created", runs.c.project, runs.c.created_at)
Index("ix_runs_status_created", runs.c.status, runs.c.created_at)
Index("ix_runs_group_created", runs.c.group_name, runs.c.created_at)

# --- the name of a run sent over HTTP (migrations 0011, 0018) ---
# A run sent over HTTP (no folder) holds its name alone in its project: an ingest that would
# name a second run of the project so is refused by the index itself, not only by the check
# before it (two ingests can race past that). Another project may hold the name too (a
# token learns nothing of other projects' runs by being refused). A folder's runs are named
# by their folders, unique in the folder.
Index("ux_runs_sent_name", runs.c.project, runs.c.name, unique=True,
      sqlite_where=runs.c.dir.is_(None), postgresql_where=runs.c.dir.is_(None))
