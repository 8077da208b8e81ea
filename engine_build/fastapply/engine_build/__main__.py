"""``python -m fastapply.engine_build``: the same as ``fastapply build``."""

from __future__ import annotations

import sys

from fastapply.engine_build.cli import main

if __name__ == "__main__":
    sys.exit(main())
