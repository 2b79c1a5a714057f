"""loopctl's conformance suite for plugins (loopctl.testing.conformance), run on this one."""

from __future__ import annotations

from loopctl.testing.conformance import PluginConformance
from loopctl_otel import plugin


class TestConformance(PluginConformance):
    plugin = plugin
    name = "otel"
    config = {"plugins": {"otel": {"exporter": "none"}}}
