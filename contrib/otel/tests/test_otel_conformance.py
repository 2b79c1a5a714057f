"""loopctl's conformance suite for plugins (loopctl.testing.conformance), run on this one."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from loopctl.testing.conformance import PluginConformance
from loopctl_otel import plugin


class TestConformance(PluginConformance):
    plugin = plugin
    name = "otel"
    config: ClassVar[Mapping[str, Any]] = {"plugins": {"otel": {"exporter": "none"}}}
