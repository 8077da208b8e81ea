"""``python -m fastapply`` is the ``fastapply`` command."""

import sys

from fastapply.cli import main

sys.exit(main())
