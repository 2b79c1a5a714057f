"""Throughput and memory of the Claude Code stream-json parser on a ~100 MB transcript.

The transcript is generated from the real recorded CLI lines in
``core/tests/data/transcripts/claude``: ids made unique per repetition, and tool results resized
to what real sessions carry (Read: a file of a few KB, shown numbered to the model and repeated
raw in ``tool_use_result``; Edit: ``originalFile``; Bash: stdout, twice), with text taken from
loopctl's own source. It is written to a temporary file, then read line by line in the same run:

(a) baseline: ``msgspec.json.decode`` of every line and nothing else;
(b) ``ClaudeParser.feed`` of every line (which decodes with msgspec and does the rest).

This machine's speed swings within a second (whole passes of the same work differed by 1.8x),
so the two are timed interleaved: the lines are read in chunks of 500, and each chunk is
decoded and parsed back to back, the order alternating. A round sums both sides over the
whole file; the figure is the median over the rounds of the ratio.

Target: (b) runs at >= 0.75 of (a)'s MB/s. Memory: the parser's peak traced allocation
(tracemalloc) on the first quarter and on the whole transcript should be about the same: it keeps
bounded tails, never raw lines.

    python benchmarks/bench_claude_parser.py [--mb 100]
"""

from __future__ import annotations

import argparse
import gc
import json
import math
import os
import random
import statistics
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Iterator
from pathlib import Path

import msgspec

sys.path.insert(0, str(Path(__file__).parent))

from _common import Figure, print_table

ROOT = Path(__file__).resolve().parent.parent
TRANSCRIPTS = ROOT / "core" / "tests" / "data" / "transcripts" / "claude"
#: The recorded conversations the stream repeats (failures are one-liners, not traffic): plain
#: tool work twice as often as a sub-agent or a compaction.
BODY = ("success_edit", "success_edit", "resumed", "subagent", "compaction")
TARGET_RATIO = 0.75


def _source_lines() -> list[str]:
    """Lines of real source files (loopctl's own), the stuff tool results are made of."""
    lines: list[str] = []
    for path in sorted((ROOT / "core" / "src" / "loopctl").rglob("*.py")):
        lines += path.read_text(encoding="utf-8").splitlines()
    return lines


def _templates() -> tuple[str, list[str], str]:
    """The init line, the body lines (conversation traffic) and a result line."""
    init = result = ""
    body: list[str] = []
    for name in BODY:
        for line in (TRANSCRIPTS / f"{name}.jsonl").read_text(encoding="utf-8").splitlines():
            record = json.loads(line)
            if record["type"] == "system" and record.get("subtype") == "init":
                init = init or line
            elif record["type"] == "result":
                result = result or line
            else:
                body.append(line)
    return init, body, result


def _slice(source: list[str], rng: random.Random, median_bytes: float) -> list[str]:
    """Consecutive real source lines adding up to about a lognormal size around the median."""
    size = min(int(rng.lognormvariate(math.log(median_bytes), 1.0)), 60_000)
    start = rng.randrange(len(source))
    taken, used = [], 0
    for text in source[start : start + 2000]:  # Claude Code reads at most 2000 lines
        taken.append(text)
        used += len(text) + 1
        if used >= size:
            break
    return taken


def _resized_tool_result(line: str, rng: random.Random, source: list[str]) -> str:
    """A tool-result line resized to what real sessions show, in both places the CLI puts it:
    the result the model sees (``message.content``) and ``tool_use_result`` (the raw data)."""
    record = json.loads(line)
    details = record.get("tool_use_result")
    block = next(
        (
            b
            for b in record["message"]["content"]
            if isinstance(b, dict) and b.get("type") == "tool_result"
        ),
        None,
    )
    if block is None or not isinstance(details, dict):
        return line
    if isinstance(details.get("file"), dict):  # Read: numbered lines, and the raw file again
        lines = _slice(source, rng, 6000)
        block["content"] = "\n".join(f"{n:>6}\t{text}" for n, text in enumerate(lines, 1))
        details["file"].update(content="\n".join(lines), numLines=len(lines), totalLines=len(lines))
    elif "originalFile" in details:  # Edit: the whole file before the edit comes along
        details["originalFile"] = "\n".join(_slice(source, rng, 8000))
    elif "stdout" in details:  # Bash: the output, twice
        output = "\n".join(_slice(source, rng, 800))
        block["content"] = output
        details["stdout"] = output
    else:
        return line
    return json.dumps(record, ensure_ascii=False, separators=(",", ":"))


def generate(path: Path, megabytes: float, seed: int = 0) -> int:
    """Write a realistic transcript of about ``megabytes`` MB; return its size in bytes."""
    rng = random.Random(seed)
    init, body, result = _templates()
    source = _source_lines()
    target = int(megabytes * 1_000_000)
    written = 0
    with open(path, "w", encoding="utf-8") as out:
        out.write(init + "\n")
        written += len(init) + 1
        repetition = 0
        while written < target:
            repetition += 1
            for line in body:
                varied = line.replace('"msg_', f'"msg_{repetition}_').replace(
                    '"toolu_', f'"toolu_{repetition}_'
                )
                if '"tool_use_result"' in varied:
                    varied = _resized_tool_result(varied, rng, source)
                out.write(varied + "\n")
                written += len(varied.encode("utf-8")) + 1
        out.write(result + "\n")
        written += len(result) + 1
    return os.path.getsize(path)


def _lines(path: Path, limit: int | None = None) -> Iterator[bytes]:
    used = 0
    with open(path, "rb", buffering=1 << 20) as handle:
        for line in handle:
            used += len(line)
            if limit is not None and used > limit:
                return
            yield line.rstrip(b"\n")


def time_interleaved(path: Path, chunk: int = 500) -> tuple[float, float, int]:
    """CPU seconds to ``msgspec.json.decode`` every line, and to feed every line to one
    ClaudeParser, taken a chunk of lines at a time: each chunk is decoded and parsed back to
    back (in turn decode first, then parser first, so neither side always finds the lines in
    the cache), so both sides see the machine in the same state. Also: the messages made."""
    from loopctl.agents.claude import ClaudeParser

    decode = msgspec.json.decode
    parser = ClaudeParser()
    feed = parser.feed
    spent = {"decode": 0.0, "parser": 0.0}
    messages = 0

    def decode_all(batch: list[bytes]) -> None:
        started = time.process_time()
        for line in batch:
            decode(line)
        spent["decode"] += time.process_time() - started

    def parse_all(batch: list[bytes]) -> None:
        nonlocal messages
        started = time.process_time()
        for line in batch:
            messages += len(feed(line))
        spent["parser"] += time.process_time() - started

    batch: list[bytes] = []
    turn = 0
    for line in _lines(path):
        batch.append(line)
        if len(batch) == chunk:
            for work in (decode_all, parse_all) if turn % 2 == 0 else (parse_all, decode_all):
                work(batch)
            batch, turn = [], turn + 1
    decode_all(batch)
    parse_all(batch)
    started = time.process_time()
    result = parser.finish(0, "")
    spent["parser"] += time.process_time() - started
    assert result.outcome.ok, result.outcome
    return spent["decode"], spent["parser"], messages


def parser_peak_bytes(path: Path, limit: int | None) -> int:
    """Peak memory traced while the parser reads the transcript (up to ``limit`` bytes)."""
    from loopctl.agents.claude import ClaudeParser

    gc.collect()
    tracemalloc.start()
    parser = ClaudeParser()
    for line in _lines(path, limit):
        parser.feed(line)
    parser.finish(0, "")
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return peak


def main(megabytes: float = 100.0, rounds: int = 5, *, show: bool = True) -> dict[str, float]:
    """Run the benchmark, print a table (unless ``show`` is False), and return its figures.

    ``benchmarks/run.py`` takes the rows from :func:`figures`.

    Times are CPU seconds (``time.process_time``), taken interleaved chunk by chunk (see the
    module's docstring) over ``rounds`` rounds; the figure is the median round's ratio.
    """
    with tempfile.TemporaryDirectory(prefix="loopctl-bench-claude-") as tmp:
        path = Path(tmp) / "transcript.jsonl"
        size = generate(path, megabytes)
        mb = size / 1_000_000
        time_interleaved(path)  # warm the page cache and both code paths once
        decode_runs: list[float] = []
        parser_runs: list[float] = []
        messages = 0
        for _ in range(rounds):
            decode_s, parser_s, messages = time_interleaved(path)
            decode_runs.append(decode_s)
            parser_runs.append(parser_s)
        decode_s = statistics.median(decode_runs)
        parser_s = statistics.median(parser_runs)
        quarter = parser_peak_bytes(path, size // 4)
        whole = parser_peak_bytes(path, None)
    figures = {
        "transcript_mb": mb,
        "decode_mb_s": mb / decode_s,
        "parser_mb_s": mb / parser_s,
        "ratio": statistics.median([d / p for d, p in zip(decode_runs, parser_runs, strict=True)]),
        "messages": float(messages),
        "peak_quarter_mb": quarter / 1_000_000,
        "peak_whole_mb": whole / 1_000_000,
        "peak_growth": whole / quarter if quarter else 0.0,
    }
    if show:
        print_table(to_figures(figures))
    return figures


def figures() -> list[Figure]:
    """The benchmark's rows for ``benchmarks/run.py``."""
    return to_figures(main(show=False))


def to_figures(f: dict[str, float]) -> list[Figure]:
    """The same figures as rows for ``benchmarks/run.py``'s table."""
    ratio_ok = f["ratio"] >= TARGET_RATIO
    return [
        Figure("claude parser: transcript size", f["transcript_mb"], "MB", note="generated"),
        Figure("  baseline: msgspec decode only", f["decode_mb_s"], "MB/s", note="same run"),
        Figure("claude parser: feed every line", f["parser_mb_s"], "MB/s"),
        Figure("claude parser / decode", f["ratio"], "x", f">= {TARGET_RATIO}", ratio_ok),
        Figure("claude parser: peak memory, 1/4", f["peak_quarter_mb"], "MB", note="tracemalloc"),
        Figure("claude parser: peak memory, all", f["peak_whole_mb"], "MB", note="tracemalloc"),
        Figure(
            "claude parser: memory growth 4x input",
            f["peak_growth"],
            "x",
            "<= 1.5",
            f["peak_growth"] <= 1.5,
            note="flat: does not grow with the transcript",
        ),
    ]


if __name__ == "__main__":
    cli = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    cli.add_argument("--mb", type=float, default=100.0, help="transcript size (default 100)")
    cli.add_argument("--rounds", type=int, default=5, help="timed rounds (default 5)")
    args = cli.parse_args()
    figures = main(args.mb, args.rounds)
    sys.exit(0 if figures["ratio"] >= TARGET_RATIO and figures["peak_growth"] <= 1.5 else 1)
