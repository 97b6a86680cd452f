"""`python -m ripple.config [PAGE]`, in the repository's root: write the settings table into
docs/configuration.md (or PAGE) from the settings table."""

from __future__ import annotations

import sys
from pathlib import Path

from ripple.config.reference import PAGE, rewritten


def main(argv: list[str]) -> None:
    page = Path(argv[0]) if argv else PAGE
    page.write_text(rewritten(page.read_text(encoding="utf-8")), encoding="utf-8")


if __name__ == "__main__":
    main(sys.argv[1:])
