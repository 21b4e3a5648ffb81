"""The options many commands take are declared once (cli/options.py): each command's
`--db` is that one option, with its help."""

from __future__ import annotations

import typing

from runwatch.cli import lazy
from runwatch.cli.options import DbOpt
from tests.foundation.test_cli_startup import groups


def test_every_db_option_is_the_shared_one() -> None:
    shared = typing.get_args(DbOpt)[1]
    seen = []
    for group in groups():
        for name in group.entries:
            command = group.load(name)
            if isinstance(command, lazy.LazyGroup):
                continue
            commands = getattr(command, "commands", {name: command}).values()
            for cmd in commands:
                for param in cmd.params:
                    # (`runwatch server`'s --db is required: it has no DIR to default to)
                    if "--db" in param.opts and not param.required:
                        seen.append(cmd.name)
                        assert param.help == shared.help, cmd.name
    assert "index" in seen and len(seen) >= 10
