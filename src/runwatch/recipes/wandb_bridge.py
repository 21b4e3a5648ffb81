"""Optional mirroring of a recipe's metrics to Weights & Biases.

W&B is used only when `wandb_project` is set, and the API key is checked before any
model or data is loaded, so a missing key fails in a second rather than at a login
prompt. `WANDB_MODE=offline` keeps W&B's files on disk; `wandb` is an optional extra.
"""

from __future__ import annotations

import importlib.util
import netrc
import os
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from runwatch.jobs.failures import RefusedInput

OFFLINE_MODES = {"offline", "dryrun", "disabled"}


class WandbSetupError(RefusedInput, RuntimeError):
    """W&B was asked for but cannot start; the message says what to set."""


def _has_credentials() -> bool:
    if os.environ.get("WANDB_API_KEY"):
        return True
    host = urlparse(os.environ.get("WANDB_BASE_URL", "https://api.wandb.ai")).hostname or ""
    try:
        return netrc.netrc().authenticators(host) is not None
    except (OSError, netrc.NetrcParseError):
        return False


def check_wandb(project: str | None, load: bool = True) -> None:
    """Fail now, with what to do, if W&B logging was requested but cannot work. With
    `load` false, wandb is looked for, not imported (seconds saved where it is not used)."""
    if project is None:
        return
    missing = WandbSetupError(
        "wandb_project is set but wandb is not installed: pip install 'runwatch[wandb]', "
        "or set wandb_project=None")
    if not load:
        if importlib.util.find_spec("wandb") is None:
            raise missing
    else:
        try:
            import wandb  # noqa: F401
        except ImportError as exc:
            raise missing from exc
    mode = os.environ.get("WANDB_MODE", "online").lower()
    if mode not in OFFLINE_MODES and not _has_credentials():
        raise WandbSetupError(
            "wandb_project is set but no W&B API key was found: set WANDB_API_KEY (or run "
            "`wandb login`), set WANDB_MODE=offline to keep W&B logs on disk, or set "
            "wandb_project=None"
        )


class WandbBridge:
    """Forwards metrics to a W&B run; with no run it does nothing (like NullRun)."""

    def __init__(self, wb_run: Any = None) -> None:
        self._run = wb_run

    @classmethod
    def start(
        cls,
        project: str | None,
        entity: str | None,
        group: str | None,
        run_name: str | None,
        config: dict[str, Any],
        directory: Path | None,
    ) -> WandbBridge:
        if project is None:
            return cls()
        import wandb

        wb_run = wandb.init(
            project=project,
            entity=entity,
            group=group,
            name=run_name,
            config=config,
            dir=str(directory) if directory is not None else None,
            # No terminal prompts and no console capture: the recipe owns its output.
            settings=wandb.Settings(console="off", silent=True),
        )
        return cls(wb_run)

    @property
    def active(self) -> bool:
        return self._run is not None

    def manifest_fields(self) -> dict[str, Any]:
        """What the runwatch manifest records about the W&B run."""
        if self._run is None:
            return {}
        url = getattr(self._run, "url", None)
        return {
            "wandb_url": url or None,
            "wandb_run_id": getattr(self._run, "id", None),
            "wandb_mode": os.environ.get("WANDB_MODE", "online").lower(),
            "wandb_dir": getattr(self._run, "dir", None),
        }

    def log(self, metrics: dict[str, Any], step: int) -> None:
        if self._run is not None:
            self._run.log(metrics, step=step)

    def finish(self, failed: bool) -> None:
        if self._run is not None:
            self._run.finish(exit_code=1 if failed else 0)
            self._run = None
