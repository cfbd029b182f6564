"""``python -m infoxlm`` runs the ``infoxlm`` command (torchrun launches it this way)."""

import sys

from .cli import main

sys.exit(main())
