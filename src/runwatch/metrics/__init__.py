"""The metric vocabulary: canonical names, meanings, units, roles and other tools' aliases.

`find_key(keys, role)` is the key among a run's keys that plays a role (the canonical
name first, then aliases: `train/loss` plays TRAIN_LOSS); `canonical(key)` is the name
the health rules read for a logged key; `describe(key)` says what a logged key is.
"""

from runwatch.metrics.aliases import Alias, canonical
from runwatch.metrics.catalogue import BY_NAME, BY_ROLE, METRICS, Metric, Role
from runwatch.metrics.lookup import KeyMeaning, describe, find_key, names

__all__ = ["BY_NAME", "BY_ROLE", "METRICS", "Alias", "KeyMeaning", "Metric", "Role",
           "canonical", "describe", "find_key", "names"]
