"""The console the command line prints its tables on."""
from __future__ import annotations

import os

from rich.console import Console

PIPED_WIDTH = 200   # columns of a table written to a pipe or a file (rich would cut it to 80)


def output_console() -> Console:
    """Standard output; when it is not a terminal (a pipe, a file) and `COLUMNS` does not say otherwise, wide
    enough that tables are not cut to 80 columns."""
    console = Console()
    if console.is_terminal or os.environ.get("COLUMNS"):
        return console
    return Console(width=PIPED_WIDTH)
