"""Drop-in fronts for other trackers' APIs, so scripts written for them record runwatch runs."""
