"""`python -m adapter.cli`: the same entry point as the `vf-sglang` script."""

import sys

from adapter.cli.entry import main

sys.exit(main())
