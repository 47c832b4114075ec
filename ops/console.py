"""The one way the CLI makes a rich console: the terminal's width on a terminal, and wide when
the output is a pipe or a file, where rich would otherwise assume 80 columns and cut table cells
short (``semsched models list | less``, a benchmark's log). ``COLUMNS`` still wins when set."""

from __future__ import annotations

import json
import os
import sys

from rich.console import Console

PIPED_WIDTH = 240  # the widest tables (models list, the trace bench's) fit


def wide_console(*, stderr: bool = False) -> Console:
    stream = sys.stderr if stderr else sys.stdout
    piped = not stream.isatty() and not os.environ.get("COLUMNS")
    return Console(stderr=stderr, width=PIPED_WIDTH if piped else None)


def print_json_line(obj: object) -> None:
    """``obj`` as one line of JSON on stdout, for scripts (``| jq``): rich would wrap it at the
    console's width and break it in the middle of a string."""
    sys.stdout.write(json.dumps(obj, default=str) + "\n")
    sys.stdout.flush()
