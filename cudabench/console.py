"""The consoles' kind: text from users, files and tools printed verbatim (no markup, no terminal
control), tables never cut, piped output as wide as COLUMNS says (130 unless it says otherwise)."""

from __future__ import annotations

import os

from rich.console import Console
from rich.table import Table

# Piped output (logs, CI) is 130 columns wide unless COLUMNS says otherwise, so tables do not wrap
# at 80 columns. Markup is off on both consoles, tables included: names, shapes (add2[n=1024]),
# paths, compiler and tool output print verbatim. Our own styling goes through `say` (or a style=
# argument), never through markup.
def piped_width(environ: "os._Environ[str] | dict[str, str]" = os.environ) -> int:
    columns = environ.get("COLUMNS", "")
    return int(columns) if columns.isdigit() and 20 <= int(columns) <= 10_000 else 130


# Control characters in text from files, tools and users (an escape sequence in a kernel's summary, a
# compiler's colour codes) are shown, not sent to the terminal: ESC becomes "\x1b".
_CONTROLS = {c: f"\\x{c:02x}" for c in [*range(0x20), 0x7F, *range(0x80, 0xA0)] if chr(c) not in "\n\t"}


def visible(text: str) -> str:
    return text.translate(_CONTROLS)


class PlainConsole(Console):
    """A console whose strings are printed as written: no markup, no terminal control from them."""

    def render_str(self, text: str, **kwargs):  # type: ignore[override]
        return super().render_str(visible(text), **kwargs)

    def print_table(self, table: Table) -> None:
        """A table at its natural width, wider than the console where it must be: a --wide results
        table or a profile's kernel table is read by scrolling sideways, never with a name cut short
        or a figure wrapped onto two lines."""
        natural = self.measure(table, options=self.options.update_width(10_000)).maximum
        if natural <= self.width:
            self.print(table)
            return
        wide = PlainConsole(file=self.file, width=natural, highlight=False, markup=False,
                            color_system=self.color_system, force_terminal=self.is_terminal)
        wide.print(table, crop=False)
