"""The recorded CLI transcripts in ``data/transcripts/<agent>/``: their names, their meta
files, and a parse of each by an adapter's parser, shared by the adapter tests."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from loopctl.agents.base import StreamParser
from loopctl.model import TurnResult

ROOT = Path(__file__).parent / "data" / "transcripts"


class Recordings:
    """One agent's recordings: ``NAME.meta.json`` beside ``NAME.<suffix>`` (the CLI's stdout)."""

    def __init__(self, agent: str, suffix: str) -> None:
        self.folder = ROOT / agent
        self.suffix = suffix
        self.names = sorted(p.name[: -len(".meta.json")] for p in self.folder.glob("*.meta.json"))

    def meta(self, name: str) -> dict[str, Any]:
        meta: dict[str, Any] = json.loads((self.folder / f"{name}.meta.json").read_text())
        return meta

    def parse(self, name: str, parser: StreamParser) -> tuple[TurnResult, list[Any]]:
        """Feed the recording to ``parser`` line by line; its result (with the recorded exit
        code and stderr) and every message it made."""
        messages: list[Any] = []
        for line in (self.folder / f"{name}.{self.suffix}").read_bytes().splitlines():
            messages += parser.feed(line)
        meta = self.meta(name)
        return parser.finish(meta["exit_code"], meta["stderr"]), messages
