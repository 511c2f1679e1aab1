"""Options that take one value, given once. click keeps the last of two and drops the other without a
word: `--shape A --shape B` would time B alone, `--timing events --timing graph` graphs alone. Every
command is built with OnceCommand, which refuses that as a usage error (exit 2) before parsing. Options
that take several values (--kernel, --direction, run's --shape) say so with `multiple` and are left alone."""

from __future__ import annotations

from typing import Any, Iterable

from typer.core import TyperCommand

try:  # the click that typer builds its commands with: its own copy since typer 0.2x, else click
    from typer._click.exceptions import UsageError
except ImportError:  # pragma: no cover - older typer
    from click.exceptions import UsageError


def valued(command: Any) -> dict[str, Any]:
    """Each spelling (--shape, -s) of the command's options that take a value, one or several."""
    return {name: param for param in command.params
            if param.param_type_name == "option" and not param.is_flag and not param.count for name in param.opts}


def single_valued(command: Any) -> dict[str, Any]:
    """Each spelling of the command's options that take one value."""
    return {name: param for name, param in valued(command).items() if not param.multiple}


def short_flags(command: Any) -> set[str]:
    """The spellings (-v) of the command's short options that take no value: a cluster (-vs X) goes on past them."""
    return {name for param in command.params if param.param_type_name == "option" and (param.is_flag or param.count)
            for name in param.opts if len(name) == 2}


def option_in(word: str, options: dict[str, Any], flags: set[str]) -> tuple[str, str] | None:
    """The option taking a value that a word gives (its spelling and what the word holds of it), if any:
    --opt, --opt=value, -s, -svalue, and -s in a cluster of short flags (-vs, -vsvalue)."""
    if word.startswith("--"):
        name = word.split("=", 1)[0]
        return (name, word) if name in options else None
    if not word.startswith("-"):
        return None
    for at in range(1, len(word)):
        name = "-" + word[at]
        if name in options:
            return name, name + word[at + 1:]
        if name not in flags:  # a value (-1), or a stranger: click's to judge
            return None
    return None


def repeated(command: Any, args: Iterable[str]) -> list[tuple[Any, list[str]]]:
    """The single-valued options given more than once, with the spellings used, in order of first use.
    Every option's value is stepped over, so a value that looks like an option (-k -vs) is not read as one."""
    options, flags = valued(command), short_flags(command)
    seen: dict[str, tuple[Any, list[str]]] = {}
    words = iter(args)
    for word in words:
        if word == "--":
            break
        found = option_in(word, options, flags)
        if found is None:
            continue
        name, given = found
        if given == name:  # its value is the next word, whatever it looks like
            given = f"{given} {next(words, '')}"
        option = options[name]
        if not option.multiple:
            seen.setdefault(option.name or name, (option, []))[1].append(given)
    return [entry for entry in seen.values() if len(entry[1]) > 1]


class OnceCommand(TyperCommand):
    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        asks_help = any(word in ctx.help_option_names for word in args)
        twice = [] if ctx.resilient_parsing or asks_help else repeated(self, args)  # completion, --help: as asked
        if twice:
            option, words = twice[0]
            hint = ("`cudabench run` and `check` take several --shape, one case each." if option.name == "shape"
                    else "Run the command once per value.")
            raise UsageError(f"{max(option.opts, key=len)} takes one value and was given {len(words)} times "
                             f"({', '.join(words)}); only the last would be used. {hint}", ctx)
        return super().parse_args(ctx, args)
