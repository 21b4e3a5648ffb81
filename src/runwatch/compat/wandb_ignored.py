"""The parts of W&B's API that runwatch accepts and ignores, so a W&B script runs on: its
data types (built with any arguments; a logged one is skipped) and the calls that do
nothing but warn once. docs/wandb-compat.md lists them.
"""

from __future__ import annotations

import enum
import os
import warnings
from collections.abc import Callable
from typing import IO, Any


class DataType:
    """One of W&B's data types runwatch does not record (W&B's `WBValue`): it is built
    with any arguments and keeps none of them; a logged one is skipped with one warning
    a key."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        pass


def _data_type(name: str) -> type[DataType]:
    return type(name, (DataType,), {"__module__": __name__,
                                    "__doc__": f"`wandb.{name}`: built and never recorded."})


# W&B's media and data types, and `Settings` (`init(settings=)` ignores it).
(Audio, BoundingBoxes2D, Classes, Graph, Histogram, Html, Image, ImageMask, Molecule, Object3D,
 Plotly, Settings, Video) = map(_data_type, (
    "Audio", "BoundingBoxes2D", "Classes", "Graph", "Histogram", "Html", "Image", "ImageMask",
    "Molecule", "Object3D", "Plotly", "Settings", "Video"))


class AlertLevel(enum.StrEnum):
    """`wandb.AlertLevel`, for `wandb.alert(level=)`."""

    INFO = "INFO"
    WARN = "WARN"
    ERROR = "ERROR"


class Artifact(DataType):
    """`wandb.Artifact`: its files are not kept. Adding to it does nothing; a logged
    artifact is not stored, so one in use has nothing to download."""

    def __init__(self, name: str = "artifact", type: str = "artifact", *args: Any,
                 **kwargs: Any) -> None:
        self.name = name
        self.type = type

    def add_file(self, *args: Any, **kwargs: Any) -> None:
        return None

    add_dir = add_reference = add = add_file

    def new_file(self, name: str, mode: str = "x", encoding: str | None = None) -> IO[Any]:
        """A file to write the artifact's `name` into: what is written goes nowhere."""
        return open(os.devnull, "w" if "b" not in mode else "wb", encoding=encoding)

    def wait(self, *args: Any, **kwargs: Any) -> Artifact:
        return self

    def download(self, *args: Any, **kwargs: Any) -> str:
        raise FileNotFoundError(f"artifact {self.name!r}: runwatch keeps no W&B artifacts, "
                                "so there is nothing to download; read the files from "
                                "where they were written")


def _ignored(name: str, result: Callable[..., Any] = lambda *a, **k: None) -> Callable[..., Any]:
    """W&B's `name` call: warns the first time it is called and returns `result(...)`."""

    said = False

    def call(*args: Any, **kwargs: Any) -> Any:
        nonlocal said
        if not said:
            said = True
            warnings.warn(f"runwatch does not support wandb.{name}(), so it does nothing "
                          "(docs/wandb-compat.md lists what is ignored)", stacklevel=2)
        return result(*args, **kwargs)

    call.__name__ = call.__qualname__ = name
    call.__doc__ = f"`wandb.{name}`: accepted, warned about once, and ignored."
    return call


def _artifact(artifact: Any = None, *args: Any, **kwargs: Any) -> Artifact:
    """The artifact given, or one named by the name or path given (W&B returns it)."""
    if isinstance(artifact, Artifact):
        return artifact
    return Artifact(str(artifact or kwargs.get("name") or "artifact"))


alert = _ignored("alert")
link_model = _ignored("link_model")
log_artifact = _ignored("log_artifact", _artifact)
log_code = _ignored("log_code")
log_model = _ignored("log_model")
mark_preempting = _ignored("mark_preempting")
restore = _ignored("restore")  # None: what W&B returns for a file it does not hold
save = _ignored("save")
unwatch = _ignored("unwatch")
use_artifact = _ignored("use_artifact", _artifact)
watch = _ignored("watch")
