"""The metric vocabulary: canonical names, the roles they play, and other frameworks' aliases.

`find_key(keys, role)` is the key among a run's keys that plays a role (the canonical
name first, then aliases: `train/loss` plays TRAIN_LOSS); `canonical(key)` is the name
the health rules read for a logged key.
"""

from runwatch.metrics.aliases import Alias, canonical
from runwatch.metrics.roles import ROLE_NAMES, Role, find_key, names

__all__ = ["ROLE_NAMES", "Alias", "Role", "canonical", "find_key", "names"]
