"""Commands that load when they run: `runwatch runs compare` imports the compare command's
module (and the libraries it needs) and no other command's.

A command is registered by the import path of its function, or of the `typer.Typer` of a
sub-command group: `app.lazy("sync", "runwatch.cli.sync_cmd:sync_cmd")`. Help listings
(`runwatch --help`) read each command's help from its module's source — the function's
docstring, or the `help="..."` given to `typer.Typer(...)` — without importing it, so
keep those plain literals (where the source says otherwise, the module is imported).
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import inspect
from typing import Any, ClassVar

import typer
from typer import _click
from typer.core import TyperCommand, TyperGroup
from typer.main import get_command_from_info, get_group_from_info
from typer.models import CommandInfo, TyperInfo

from runwatch.cli.plainparams import use_plain_values

# A registered target: "package.module:attribute", or a typer.Typer built in place.
Target = str | typer.Typer


class LazyGroup(TyperGroup):
    """A Typer group whose registered targets are imported on first use. `entries` is set
    on the subclass that LazyTyper makes for each of its instances."""

    entries: ClassVar[dict[str, Target]] = {}

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._loaded: dict[str, _click.Command] = {}
        self._listing = False

    def list_commands(self, ctx: _click.Context) -> list[str]:
        return [*self.entries, *(name for name in self.commands if name not in self.entries)]

    def get_command(self, ctx: _click.Context, cmd_name: str) -> _click.Command | None:
        if cmd_name not in self.entries:
            return super().get_command(ctx, cmd_name)
        if self._listing and cmd_name not in self._loaded:
            return TyperCommand(name=cmd_name, help=help_of(self.entries[cmd_name]))
        return self.load(cmd_name)

    def load(self, name: str) -> _click.Command:
        """The command registered as `name`, its module imported (once)."""
        if name not in self._loaded:
            target = self.entries[name]
            obj = resolve(target) if isinstance(target, str) else target
            command: _click.Command
            if isinstance(obj, typer.Typer):
                # as app.add_typer(obj, name=name) would build it
                command = get_group_from_info(
                    TyperInfo(obj, name=name), pretty_exceptions_short=True,
                    rich_markup_mode=self.rich_markup_mode,
                    suggest_commands=self.suggest_commands)
            else:
                command = get_command_from_info(
                    CommandInfo(name=name, callback=obj), pretty_exceptions_short=True,
                    rich_markup_mode=self.rich_markup_mode)
            use_plain_values(command)
            self._loaded[name] = command
        return self._loaded[name]

    def parse_args(self, ctx: _click.Context, args: list[str]) -> list[str]:
        # typer adds the root's completion options after making the group, and each
        # command its --help option when it first parses
        self.get_help_option(ctx)
        use_plain_values(self)
        return super().parse_args(ctx, args)

    def resolve_command(self, ctx: _click.Context, args: list[str]
                        ) -> tuple[str | None, _click.Command | None, list[str]]:
        name, command, rest = super().resolve_command(ctx, args)
        if command is not None and not isinstance(command, LazyGroup):
            _prepare(command, name, ctx)
        return name, command, rest

    def format_help(self, ctx: _click.Context, formatter: _click.HelpFormatter) -> None:
        # the listing shows each command's help, read from its source: nothing imported
        self._listing = True
        try:
            super().format_help(ctx, formatter)
        finally:
            self._listing = False


def _prepare(command: _click.Command, name: str | None, parent: _click.Context) -> None:
    """Plain conversion for `command` and, in a typer group, its commands, their --help
    options included: made now, each in the context it will parse in."""
    ctx = command.context_class(command, info_name=name, parent=parent,
                                **command.context_settings)
    command.get_help_option(ctx)
    use_plain_values(command)
    for sub_name, sub in getattr(command, "commands", {}).items():
        if not isinstance(sub, LazyGroup):
            _prepare(sub, sub_name, ctx)


class LazyTyper(typer.Typer):
    """A typer.Typer whose commands are registered by import path (`lazy`) and imported only
    when one runs. Commands added the usual way (`@app.command()`) still work."""

    def __init__(self, **kwargs: Any) -> None:
        self.entries: dict[str, Target] = {}
        group = type("LazyGroupOf", (LazyGroup,), {"entries": self.entries})
        super().__init__(cls=group, **kwargs)
        # Without a callback, typer turns an app with no eager command into nothing; this
        # one adds no option, and the app's help= stays its help.
        self.callback()(_no_options)

    def lazy(self, name: str, target: Target) -> None:
        """Register `target` ("package.module:function", "package.module:typer_app" or a
        typer.Typer) as the command `name`."""
        self.entries[name] = target


def _no_options() -> None:
    pass


def resolve(target: str) -> Any:
    module, _, attribute = target.partition(":")
    return getattr(importlib.import_module(module), attribute)


def help_of(target: Target) -> str:
    """A registered command's help as typer would show it, read from its module's source
    where that holds it as a literal; else from the imported object."""
    if isinstance(target, typer.Typer):
        return _typer_help(target)
    module, _, attribute = target.partition(":")
    spec = importlib.util.find_spec(module)
    if spec is not None and spec.origin and spec.origin.endswith(".py"):
        with open(spec.origin, encoding="utf-8") as f:
            tree = ast.parse(f.read(), spec.origin)
        text = _literal_help(tree, attribute)
        if text is not None:
            return text
    obj = resolve(target)
    return _typer_help(obj) if isinstance(obj, typer.Typer) else inspect.getdoc(obj) or ""


def _literal_help(tree: ast.Module, name: str) -> str | None:
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == name:
            return ast.get_docstring(node) or ""
        if (isinstance(node, ast.Assign | ast.AnnAssign) and isinstance(node.value, ast.Call)
                and any(isinstance(t, ast.Name) and t.id == name for t in _targets(node))):
            for kw in node.value.keywords:
                if (kw.arg == "help" and isinstance(kw.value, ast.Constant)
                        and isinstance(kw.value.value, str)):
                    return inspect.cleandoc(kw.value.value)
            return None
    return None


def _targets(node: ast.Assign | ast.AnnAssign) -> list[ast.expr]:
    return node.targets if isinstance(node, ast.Assign) else [node.target]


def _typer_help(app: typer.Typer) -> str:
    group = get_group_from_info(TyperInfo(app), pretty_exceptions_short=True,
                                rich_markup_mode=None, suggest_commands=True)
    return group.help or ""
