"""The benchmark's chart: completion and tokens per contestant, as a dependency-free SVG file.

Two panels side by side, one bar per contestant in each: how many of its runs completed (of how
many), and the tokens all its runs were billed. ``run.py --chart FILE`` writes it; docs/efficacy.md
embeds the one of the last full run.
"""

from __future__ import annotations

from collections.abc import Sequence
from html import escape
from pathlib import Path

from efficacy.harness import RunRecord
from efficacy.report import summary

WIDTH = 760
HEIGHT = 320
#: The panels' plot area: top, bottom (baseline), and each panel's left edge and width.
TOP, BASE = 60, 250
PANEL_LEFT = (50, 430)
PANEL_W = 300
COLOURS = ("#9aa5b1", "#6b7b8c", "#4c9f70", "#1f7a4d", "#c98a2b", "#8a5a9f")


def svg(records: Sequence[RunRecord], title: str = "Efficacy benchmark") -> str:
    """The chart of ``records`` as an SVG document."""
    totals = summary(records)
    names = list(totals)
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" '
        f'viewBox="0 0 {WIDTH} {HEIGHT}" font-family="sans-serif" font-size="12">',
        f'<rect width="{WIDTH}" height="{HEIGHT}" fill="white"/>',
        f'<text x="{WIDTH // 2}" y="22" text-anchor="middle" font-size="15">{escape(title)}</text>',
    ]
    runs = max((row["runs"] for row in totals.values()), default=1) or 1
    completed = [
        (name, totals[name]["completed"], f"{totals[name]['completed']}/{totals[name]['runs']}")
        for name in names
    ]
    tokens = [
        (name, totals[name]["tokens"], f"{totals[name]['tokens'] / 1000:,.0f}k") for name in names
    ]
    parts += _panel(PANEL_LEFT[0], "runs completed", completed, runs)
    most = max((row["tokens"] for row in totals.values()), default=1) or 1
    parts += _panel(PANEL_LEFT[1], "tokens billed (all runs)", tokens, most)
    parts.append("</svg>")
    return "\n".join(parts) + "\n"


def _panel(left: int, heading: str, bars: list[tuple[str, int, str]], top_value: int) -> list[str]:
    parts = [
        f'<text x="{left + PANEL_W // 2}" y="{TOP - 18}" text-anchor="middle">{escape(heading)}</text>',
        f'<line x1="{left}" y1="{BASE}" x2="{left + PANEL_W}" y2="{BASE}" stroke="black"/>',
    ]
    slot = PANEL_W / max(1, len(bars))
    for index, (name, value, label) in enumerate(bars):
        height = (BASE - TOP) * value / top_value if top_value else 0
        x = left + index * slot + slot * 0.15
        width = slot * 0.7
        middle = x + width / 2
        colour = COLOURS[index % len(COLOURS)]
        parts += [
            f'<rect x="{x:.1f}" y="{BASE - height:.1f}" width="{width:.1f}" '
            f'height="{height:.1f}" fill="{colour}"/>',
            f'<text x="{middle:.1f}" y="{BASE - height - 4:.1f}" '
            f'text-anchor="middle">{escape(label)}</text>',
            f'<text x="{middle:.1f}" y="{BASE + 16}" text-anchor="middle" '
            f'font-size="10">{escape(name)}</text>',
        ]
    return parts


def write(path: Path, records: Sequence[RunRecord], title: str = "Efficacy benchmark") -> None:
    """Write the chart of ``records`` to ``path``."""
    path.write_text(svg(records, title), encoding="utf-8")
