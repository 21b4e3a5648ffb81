"""Turning whatever a user passes as `config` into YAML text and a plain dict."""

from __future__ import annotations

import dataclasses
from typing import Any

import yaml


def config_to_dict(config: Any) -> dict[str, Any]:
    """A plain dict for a dataclass, a mapping, an object with to_dict(), or None."""
    if config is None:
        return {}
    if dataclasses.is_dataclass(config) and not isinstance(config, type):
        return dataclasses.asdict(config)
    if hasattr(config, "to_dict"):
        return dict(config.to_dict())
    if isinstance(config, dict):
        return dict(config)
    raise TypeError(
        "config must be a dataclass, a dict or an object with to_yaml(); "
        f"got {type(config).__name__}"
    )


def config_to_yaml(config: Any) -> str:
    """The config's own YAML when it can write it (so <Config>.from_yaml reads it back)."""
    if hasattr(config, "to_yaml"):
        return str(config.to_yaml())
    return yaml.safe_dump(_plain(config_to_dict(config)), sort_keys=False)


def _plain(value: Any) -> Any:
    """Make a value safe_dump-able: tuples to lists, unknown objects to strings."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if value is None or isinstance(value, bool | int | float | str):
        return value
    return str(value)
