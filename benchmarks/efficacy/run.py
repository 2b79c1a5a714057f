"""Run the efficacy benchmark: ``python benchmarks/efficacy/run.py --help``."""

import sys
from pathlib import Path

# the package is `efficacy`, in benchmarks/; this folder itself must not shadow its modules
sys.path[0] = str(Path(__file__).resolve().parent.parent)

from efficacy.cli import main  # noqa: E402

sys.exit(main(sys.argv[1:]))
