"""loopctl's conformance suite for plugins (loopctl.testing.conformance), run on this one."""

from __future__ import annotations

from pathlib import Path

import pytest

from loopctl.testing.conformance import PluginConformance
from loopctl_failure_classifier import plugin


class TestConformance(PluginConformance):
    plugin = plugin
    name = "failure-classifier"

    # whole loops (the middle Pythons leave the slow ones out: pyproject's markers)
    @pytest.mark.slow
    def test_survives_missing_and_malformed_inputs(self, tmp_path: Path) -> None:
        super().test_survives_missing_and_malformed_inputs(tmp_path)
