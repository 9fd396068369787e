"""Help as a terminal user reads it: sentences wrapped to the terminal's width, and option
hints as the user types them.

Typer's defaults draw help in Rich panels — at 80 columns a sentence wraps inside a
column a third of the screen wide — and give each option a type hint (``<float>``,
``<bool>`` on flags, ``<list[str]>``) and each required argument a brace (``{urls}...``).
Every group here is built with :func:`group`, which asks for Click's plain layout, and the
command tree is finished by :func:`conventional_hints`: a value option's hint is its name
in capitals (``--seconds SECONDS``, ``--format FORMAT``), an argument reads ``URLS...`` in the usage line and
in its own list, as Click and argparse programs write them.
"""

from __future__ import annotations

from typing import Any

import typer
import typer.core
import typer.main


def group(help: str, **kwargs: Any) -> typer.Typer:
    """A command group with plain (not boxed) help and the tool's conventions."""
    return typer.Typer(no_args_is_help=True, rich_markup_mode=None, help=help, **kwargs)


def first_clause(text: str) -> str:
    """The first clause of a help text (up to its first '.', ';' or ':' that ends one): what
    a command group lists beside the command's name, rather than a sentence cut off at a
    fixed width ("exit 3 if...")."""
    head = " ".join(text.split("\n\n", 1)[0].split())
    depth = 0   # (a '(per source: ...)' does not end the clause)
    for i, ch in enumerate(head):
        depth += {"(": 1, ")": -1}.get(ch, 0)
        if depth == 0 and ch in ".;:" and head[i + 1:i + 2] == " ":
            return head[:i]
    return head.rstrip(".")


def conventional_hints(command: Any) -> Any:
    """``command`` (a built Typer command or group) with every parameter's hint in the
    conventional form, recursively; returned for chaining."""
    for sub in getattr(command, "commands", {}).values():
        conventional_hints(sub)
        if sub.help and not sub.short_help:   # a group lists it by its first clause, whole
            sub.short_help = first_clause(sub.help)
    for param in getattr(command, "params", []):
        name = (param.name or "").upper()
        if isinstance(param, typer.core.TyperArgument):
            usage = name + ("..." if param.nargs != 1 else "")
            usage = usage if param.required else f"[{usage}]"
            # (per instance: Typer offers no hook for an argument's usage or type column)
            param.get_usage_pieces = lambda ctx, u=usage: [u]   # type: ignore[method-assign,misc]
            param.display_type_rich = lambda ctx: None   # type: ignore[method-assign]
            param.metavar = name + ("..." if param.nargs != 1 else "")
        elif isinstance(param, typer.core.TyperOption) and not param.is_flag and param.metavar is None:
            long = next((o for o in param.opts if o.startswith("--")), None)   # --format: FORMAT
            param.metavar = long[2:].replace("-", "_").upper() if long else name
    return command
