"""The consoles commands print through, in a module light enough for `burnside lint` to import.

`cli.output` (the comparison commands' rendering) pulls in numpy and the
report machinery; a command that only prints needs none of it.
"""

from __future__ import annotations

from rich.console import Console

stdout = Console(highlight=False, soft_wrap=True)
stderr = Console(stderr=True, highlight=False, soft_wrap=True)
