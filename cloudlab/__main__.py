"""``python -m cloudlab``: see :mod:`cloudlab.cli`."""

from __future__ import annotations

import sys

from cloudlab.cli import main

if __name__ == "__main__":
    sys.exit(main())
