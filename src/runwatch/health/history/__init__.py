"""docs/health.md's third part: what each session measured on the corpus and changed, round
by round (the record the protocol asks for). One Markdown file a session
(`sessionNN.md`), joined in order; a new session adds its file, a new round goes in the
file of the session that scored it."""

from __future__ import annotations

from importlib.resources import files


def history() -> str:
    """Every session's part, oldest first."""
    parts = sorted((p for p in files(__name__).iterdir() if p.name.endswith(".md")),
                   key=lambda p: p.name)
    return "".join(p.read_text(encoding="utf-8") for p in parts)
