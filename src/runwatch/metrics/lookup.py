"""Lookups over the vocabulary: which key plays a role, and what a logged key is.

A run keeps the names it logged. `find_key` answers which of them plays a role: the
canonical name first, then the names other frameworks log for it (the alias tables, in
their order), then names that reach it through a prefix or pattern rule (`train/loss`).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache

from runwatch.metrics.aliases import EXACT, SHOWN, canonical, resolve
from runwatch.metrics.catalogue import BY_NAME, BY_ROLE, Metric, Role


@cache
def names(role: Role) -> tuple[str, ...]:
    """The names that play `role`, best first: the canonical name, then its listed aliases.

    Names reached only through a prefix or pattern rule are not listed (see `find_key`);
    an alias whose values need a transform (tinker-cookbook's `frac_mixed`) is left out,
    since shown as is it would mislead."""
    name = BY_ROLE[role].name
    listed = [k for table in (EXACT, SHOWN) for k, a in table.items()
              if a.canonical == name and a.transform is None]
    return (name, *listed)


def find_key(keys: Iterable[str], role: Role) -> str | None:
    """The key among `keys` that plays `role`, or None when none does.

    The canonical name wins, then a listed alias (in `names` order), then any key that
    the prefix and pattern rules map to the canonical name (the first in sorted order)."""
    listed = names(role)
    present = set(keys)
    best = next((n for n in listed if n in present), None)
    if best is not None:
        return best
    return next((k for k in sorted(present) if canonical(k) == (listed[0], None)), None)


@dataclass(frozen=True)
class KeyMeaning:
    """What a logged key is: its canonical name and, when the vocabulary knows it, more."""

    canonical: str
    metric: Metric | None
    transform: str | None

    @property
    def role(self) -> Role | None:
        """The role the key plays as logged (none when its values need a transform)."""
        if self.metric is None or self.transform is not None:
            return None
        return self.metric.role


def describe(key: str) -> KeyMeaning:
    """The canonical name of a logged key, its catalogue entry and the transform it needs,
    as the displays read it (the keys API, a run's results): the alias tables, prefixes and
    patterns the health rules read too (`resolve`), then, under the name as logged, the
    names only the displays read (`SHOWN`), as `names` and so `find_key` list them."""
    name, alias = resolve(key)
    if alias is None:
        alias = SHOWN.get(key)
    if alias is not None:
        name = alias.canonical
    return KeyMeaning(name, BY_NAME.get(name), alias.transform if alias else None)
