"""Derived views of runs, shared by the CLI and the API: the run summary and detail
(views, detail), results, tiles and cost (results), duration and phase timing (timing),
and downsampling of series (downsample)."""
