"""``python -m efficacy`` (with ``benchmarks`` on the path): see :mod:`efficacy.cli`."""

import sys

from efficacy.cli import main

sys.exit(main(sys.argv[1:]))
