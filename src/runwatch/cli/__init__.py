"""The `runwatch` command line (Typer + Rich)."""
