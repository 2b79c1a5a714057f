"""The context monitor's costs: per streamed message, per briefing, and its memory.

Everything runs inside a real loop (``run_loop`` with the ``command`` agent), from a small probe
plugin's ``before_iteration`` hook, so the monitor sees the real :class:`loopctl.Loop`: events go
to the real ``events.jsonl``, the briefing runs the real ``git diff --stat``.

1. Gauge update per message: 40,000 streamed messages (text, tool call, tool result, usage, in
   turn; usage climbing from 5% to 69% of a 200k window, so about 64 ``loop.context_usage``
   events are written) through the whole ``on_agent_message`` hook relay, and through the
   monitor alone. Baseline in the same run: constructing the same ``AgentMessage`` objects.
   Target: <= 50 µs per message through the relay.
2. Building the briefing with 500 changed files (uncommitted edits to 500 tracked files) and
   10,000 recorded tool calls. Baseline: the ``git diff --stat`` it runs, alone. Target: <= 100 ms.
3. Memory: the monitor's traced allocations after 10,000 and after 100,000 tool calls (each with
   a distinct path: the worst case for the retention tables). Target: 100k / 10k <= 1.25, i.e.
   bounded by ``recent_tool_calls``/``activity_retention``, not by run length.

    python benchmarks/bench_context_monitor.py
"""

from __future__ import annotations

import gc
import statistics
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

from _common import Figure, print_table

import loopctl_context_monitor.plugin as context_monitor
from loopctl import AgentMessage, MessageKind, ToolCall, Usage, hookimpl
from loopctl.testing import make_project, run_loop
from loopctl_context_monitor.config import ContextMonitorConfig
from loopctl_context_monitor.gauge import Reading
from loopctl_context_monitor.monitor import Monitor

MESSAGES = 40_000
CHANGED_FILES = 500
TOOL_CALLS = 10_000
WINDOW = 200_000


def message_specs(count: int) -> list[tuple[Any, ...]]:
    """The plain data of a realistic stream: text, tool call, tool result, usage, in turn."""
    specs: list[tuple[Any, ...]] = []
    requests = count // 4
    for i in range(requests):
        call_id = f"toolu_{i}"
        tokens = 10_000 + (128_000 * i) // max(1, requests)  # 5% → 69%: no restart
        specs += [
            (MessageKind.TEXT, f"step {i}", None, None),
            (MessageKind.TOOL_CALL, None, ("Read", f"src/pkg/module_{i % 700}.py", call_id), None),
            (MessageKind.TOOL_RESULT, None, ("Read", "", call_id), None),
            (MessageKind.USAGE, None, None, tokens),
        ]
    return specs


def build(spec: tuple[Any, ...]) -> AgentMessage:
    kind, text, call, tokens = spec
    return AgentMessage(
        kind=kind,
        text=text,
        tool_call=None if call is None else ToolCall(call[0], call[1], call[2]),
        usage=None if tokens is None else Usage(input_tokens=500, cache_read_input_tokens=tokens),
        context_window=WINDOW if tokens is not None else None,
        session_id="bench-session",
    )


class Probe:
    """Measures from inside a running loop, once, before its first agent turn."""

    def __init__(self) -> None:
        self.results: dict[str, Any] = {}

    @hookimpl(trylast=True)
    def before_iteration(self, loop: Any) -> None:
        if self.results:
            return
        specs = message_specs(MESSAGES)
        # baseline: constructing the messages
        started = time.perf_counter()
        messages = [build(spec) for spec in specs]
        construct = time.perf_counter() - started
        relay = loop.hook.on_agent_message
        # through the hook relay (pluggy, isolation, the monitor), three rounds, best kept
        relay_runs = []
        monitor_runs = []
        for _ in range(3):
            context_monitor.monitor_for(loop).gauge.new_session()
            gc.collect()
            started = time.perf_counter()
            for message in messages:
                relay(loop=loop, message=message)
            relay_runs.append(time.perf_counter() - started)
            monitor = context_monitor.monitor_for(loop)
            monitor.gauge.new_session()
            started = time.perf_counter()
            for message in messages:
                monitor.on_message(message)
            monitor_runs.append(time.perf_counter() - started)
        self.results["per_message_relay_us"] = min(relay_runs) / len(messages) * 1e6
        self.results["per_message_monitor_us"] = min(monitor_runs) / len(messages) * 1e6
        self.results["construct_us"] = construct / len(messages) * 1e6
        self.results["usage_events"] = len([m for m in messages if m.kind is MessageKind.USAGE])

        # the briefing: 10,000 recorded tool calls, 500 changed files
        monitor = Monitor(loop, ContextMonitorConfig())
        for i in range(TOOL_CALLS):
            kind = ("Read", "Edit", "Bash", "Grep")[i % 4]
            call = ToolCall(kind, f"src/pkg/module_{i}.py", f"c{i}")
            monitor.activity.note_call(call)
            call.exit_code, call.result_excerpt = 1, "1 failed, 2 passed in 0.1s"
            monitor.activity.note_result(call)
        loop.add_failed_approach("the regex parser was too slow", source="bench")
        reading = Reading(150_000, WINDOW)
        build_times, stat_times, sizes = [], [], []
        for _ in range(15):
            started = time.perf_counter()
            briefing = monitor._briefing(1, "warn", reading)
            build_times.append(time.perf_counter() - started)
            sizes.append(len(briefing.text))
            started = time.perf_counter()
            stat = loop.workspace.diff_stat(loop.start_commit)
            stat_times.append(time.perf_counter() - started)
        self.results["briefing_ms"] = statistics.median(build_times) * 1000
        self.results["diff_stat_ms"] = statistics.median(stat_times) * 1000
        self.results["briefing_chars"] = max(sizes)
        self.results["stat_files"] = len(stat.splitlines()) - 1

        # memory: 10k vs 100k tool calls through a fresh monitor
        def traced(calls: int) -> int:
            gc.collect()
            tracemalloc.start()
            fresh = Monitor(loop, ContextMonitorConfig())
            for i in range(calls):
                fresh.on_message(
                    AgentMessage(
                        kind=MessageKind.TOOL_CALL,
                        tool_call=ToolCall("Read", f"src/deep/path/module_{i}.py", f"m{i}"),
                    )
                )
            gc.collect()
            current, _ = tracemalloc.get_traced_memory()
            tracemalloc.stop()
            del fresh
            return current

        self.results["memory_10k"] = traced(10_000)
        self.results["memory_100k"] = traced(100_000)


def measure() -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="loopctl-bench-cm-") as tmp:
        project = make_project(Path(tmp) / "project")
        for i in range(CHANGED_FILES):
            project.write(f"src/pkg/module_{i}.py", f"VALUE = {i}\n")
        project.commit("500 modules")
        for i in range(CHANGED_FILES):
            project.write(f"src/pkg/module_{i}.py", f"VALUE = {i}\nNEW = {i * 2}\n")
        probe = Probe()
        result = run_loop(
            project,
            "benchmark the context monitor",
            agent="command",
            test_cmd="true",
            config={"agent_cmd": "true", "limits": {"max_iterations": 1}},
            plugins={"context-monitor": context_monitor, "bench-probe": probe},
        )
        assert result.status == "complete", result.outcome
        return probe.results


def figures() -> list[Figure]:
    r = measure()
    relay, monitor, construct = (
        r["per_message_relay_us"],
        r["per_message_monitor_us"],
        r["construct_us"],
    )
    ratio = r["memory_100k"] / r["memory_10k"]
    return [
        Figure(
            "gauge update per message, hook relay",
            relay,
            "µs",
            "<= 50 µs",
            relay <= 50,
            f"{MESSAGES:,} messages, {r['usage_events']:,} with usage",
        ),
        Figure("  the monitor alone", monitor, "µs"),
        Figure("  baseline: constructing the AgentMessage", construct, "µs", note="same run"),
        Figure("  relay / construction", relay / construct, "x"),
        Figure(
            "briefing with 500 changed files, 10k tool calls",
            r["briefing_ms"],
            "ms",
            "<= 100 ms",
            r["briefing_ms"] <= 100,
            f"median of 15; {r['stat_files']} files in the stat; {r['briefing_chars']} chars",
        ),
        Figure("  baseline: git diff --stat alone", r["diff_stat_ms"], "ms", note="same run"),
        Figure("  briefing / git diff --stat", r["briefing_ms"] / r["diff_stat_ms"], "x"),
        Figure("monitor memory after 10k tool calls", r["memory_10k"] / 1024, "KB"),
        Figure("monitor memory after 100k tool calls", r["memory_100k"] / 1024, "KB"),
        Figure("  100k / 10k", ratio, "x", "<= 1.25", ratio <= 1.25, "bounded by retention"),
    ]


if __name__ == "__main__":
    print_table(figures())
