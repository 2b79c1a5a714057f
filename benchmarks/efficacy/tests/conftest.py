"""The efficacy package lives in benchmarks/: put that folder on the path for its tests."""

import sys
from pathlib import Path

BENCHMARKS = str(Path(__file__).resolve().parents[2])
if BENCHMARKS not in sys.path:
    sys.path.insert(0, BENCHMARKS)
