"""`python -m runwatch` runs the CLI."""

from runwatch.cli.main import app

app()
