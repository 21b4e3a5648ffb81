"""A run's config.yaml read back: YAML that stays small once its aliases are expanded.

The file is capped at 4 MiB on disk and over HTTP (`safeio.CAPS`), but YAML's anchors
and aliases let a few hundred bytes stand for gigabytes: nine lines of `&a [*b, *b, …]`
each nine times the last ("billion laughs"). The parser keeps each anchored value once,
so loading is cheap; what expands it is every reader after it that walks or serialises
the values (the run detail's JSON, `runs settings`, the compare report). Each reader
therefore loads the text here, which measures the document as those readers will see it,
with the aliases expanded, and refuses one past `MAX_VALUES` values or `MAX_DEPTH`
levels, or one that contains itself, before any of them touches it.
"""

from __future__ import annotations

from typing import Any

import yaml

# libyaml's parser where it is built (it also refuses a nesting deeper than 1,000 levels
# itself; the pure-Python one recurses and would run out of stack first)
LOADER: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
# A config of every hyperparameter a trainer takes is a few hundred values; a dataset
# mixture or a sweep grid spelled out, a few thousand.
MAX_VALUES = 100_000
MAX_DEPTH = 64


class ConfigError(yaml.YAMLError):
    """config.yaml parses, but is not a config the readers can take (its message says
    why, and what to write instead)."""


def load_config(text: str) -> Any:
    """The parsed config; raises yaml.YAMLError (ConfigError for one that parses but
    expands too far, nests too deep or contains itself) where it cannot be read."""
    try:
        data = yaml.load(text, Loader=LOADER)
    except RecursionError as exc:
        raise ConfigError(f"config.yaml nests deeper than this reader can follow; "
                          f"keep it under {MAX_DEPTH} levels") from exc
    measure(data)
    return data


def measure(data: Any) -> int:
    """How many values `data` holds with its shared parts counted at every place they
    appear (what a JSON of it holds); raises ConfigError past the bounds. Each shared
    part is measured once, so a document of a billion expanded values costs as much as
    its text."""
    sizes: dict[int, int] = {}
    on_path: set[int] = set()
    # (node, its children still to visit, its depth)
    stack: list[tuple[Any, list[Any] | None, int]] = [(data, None, 1)]
    while stack:
        node, todo, depth = stack[-1]
        if todo is None:
            children = _children(node)
            if children is None:  # a scalar
                stack.pop()
                _add_to_parent(stack, sizes, 1)
                continue
            key = id(node)
            if key in on_path:
                raise ConfigError("config.yaml contains itself (an alias inside the value "
                                  "its anchor names): write the values out")
            if key in sizes:  # a shared part measured already
                stack.pop()
                _add_to_parent(stack, sizes, sizes[key])
                continue
            if depth > MAX_DEPTH:
                raise ConfigError(f"config.yaml nests more than {MAX_DEPTH} levels deep: "
                                  "write it flatter")
            on_path.add(key)
            sizes[key] = 1
            stack[-1] = (node, children, depth)
            continue
        if todo:
            stack.append((todo.pop(), None, depth + 1))
            continue
        stack.pop()
        on_path.discard(id(node))
        _add_to_parent(stack, sizes, sizes[id(node)])
    return sizes.get(id(data), 1)


def _children(node: Any) -> list[Any] | None:
    if isinstance(node, dict):
        return [v for kv in node.items() for v in kv]
    if isinstance(node, list | tuple | set):
        return list(node)
    return None


def _add_to_parent(stack: list[tuple[Any, list[Any] | None, int]], sizes: dict[int, int],
                   size: int) -> None:
    if not stack:
        return
    parent = id(stack[-1][0])
    sizes[parent] += size
    if sizes[parent] > MAX_VALUES:
        raise ConfigError(f"config.yaml holds more than {MAX_VALUES:,} values once its "
                          "YAML aliases (*name) are expanded, as every reader of it "
                          "expands them: write the values out once, or fewer of them")
