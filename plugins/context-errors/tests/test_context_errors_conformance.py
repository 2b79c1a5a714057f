"""loopctl's conformance suite for plugins (loopctl.testing.conformance), run on this one."""

from __future__ import annotations

from pathlib import Path

import pytest

from loopctl.testing.conformance import PluginConformance
from loopctl_context_errors import plugin


class TestConformance(PluginConformance):
    plugin = plugin
    name = "context-errors"

    # whole loops (the middle Pythons leave the slow ones out: pyproject's markers)
    @pytest.mark.slow
    def test_survives_missing_and_malformed_inputs(self, tmp_path: Path) -> None:
        super().test_survives_missing_and_malformed_inputs(tmp_path)

    @pytest.mark.slow
    def test_config_errors_name_the_key(self, tmp_path: Path) -> None:
        super().test_config_errors_name_the_key(tmp_path)
