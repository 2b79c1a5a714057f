"""context-errors: categorizer throughput, report latency and failure-memory queries.

Figures, each with a baseline measured in the same run:

* **categorize, failing logs** — MB/s over logs of 1 MB and 8 MB: realistic passing output
  (pytest, cargo, npm, timestamps) followed by a real failure from the labelled corpus. Baseline:
  a plain Python line scan (``"rror" in line`` over ``splitlines()``) of the same logs.
* **categorize, no recognisable error** — the worst case (every tier scans the output); shown
  for information.
* **report for a 1 MB log** — ``build_report`` (categorize, memory query at 100,000 stored
  failures, suggestions, redaction) plus the GitHub rendering; baseline: the line scan of it.
* **memory query p95 at 100,000 failures** — ``FailureMemory.query_similar`` on the SQLite
  store (exact signature; then FTS5 postings of the 4 rarest words, scored by their IDF in
  Python and the best re-ranked by word overlap). Baselines: a naive FTS5 query OR-ing all of
  the failure's words, and a full fuzzy scan (word-set Jaccard over every stored row).
* **memory query p95 at 100,000 failures (postgres)** — the same 200 queries on a Postgres copy
  of that store (``FailureMemory.copy_to``, as ``loopctl memory copy`` does; its time is shown
  for information). Baseline: the SQLite p95 above; the figure also fails unless all 200 queries
  give the same top-3 ids on both backends.
* **record p95** — ``record_failure`` of 200 new failures into the 100,000-row store, on Postgres
  (≤ 5 ms) and, as its baseline, on SQLite (the same failures).

The store is built in a temporary directory from the corpus's decisive lines with their names,
numbers and paths varied (100,000 rows through ``bulk_insert``: one transaction, batches of
5,000 inserted at once).

The Postgres server is the one at ``LOOPCTL_TEST_POSTGRES_URL`` (a superuser URL), else a
throwaway cluster started from Debian's binaries as the tests start it
(``plugins/context-errors/tests/pg_testkit.py``); the benchmark gets a database and a role of its
own there, and drops them (and stops a throwaway cluster) at the end, whatever happens. Without
psycopg or a server the Postgres rows read "skipped" with the reason, and the rest is measured.

    python benchmarks/bench_context_errors.py
"""

from __future__ import annotations

import json
import math
import os
import random
import re
import signal
import sqlite3
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from pathlib import Path
from types import FrameType
from typing import NamedTuple

sys.path.insert(0, str(Path(__file__).parent))

from _common import Figure, print_table

from loopctl_context_errors.categories import categorize
from loopctl_context_errors.memory import FailureMemory, one_line, signature_of, tokens_of
from loopctl_context_errors.report import build_report, render_github
from loopctl_context_errors.store import StoreError, parse_location

ROOT = Path(__file__).resolve().parent.parent
TESTS = ROOT / "plugins" / "context-errors" / "tests"
CORPUS = TESTS / "corpus"
STORED = 100_000
QUERIES = 200

NOISE = (
    "2024-05-01T12:{m:02d}:{s:02d}.{ms:03d}Z INFO worker-{w} processed request id={i} in {ms} ms",
    "tests/test_module_{w}.py::test_case_{i} PASSED                          [{p:3d}%]",
    "   Compiling serde_derive-{w} v1.0.{i}",
    "[{m:02d}:{s:02d}] DEBUG cache hit for key user:{i} (size {ms} bytes)",
    "npm http fetch GET 200 https://registry.example/pkg-{w} {ms}ms (cache hit)",
    "WARN deprecated option --legacy-{w} used in config line {i}",
    "ok {i} - handles input variant {w}",
)
WORDS = [
    f"{a}{b}"
    for a in ("load", "save", "parse", "fetch", "build", "render", "order", "user", "cart", "auth")
    for b in (
        "Config",
        "Item",
        "Report",
        "Token",
        "Queue",
        "Index",
        "Cache",
        "Store",
        "Route",
        "Job",
    )
]


def _noise(size: int, rng: random.Random) -> str:
    lines: list[str] = []
    total = 0
    i = 0
    while total < size:
        line = rng.choice(NOISE).format(m=i % 60, s=i % 60, ms=i % 1000, w=i % 9, i=i, p=i % 100)
        lines.append(line)
        total += len(line) + 1
        i += 1
    return "\n".join(lines)


def _cases() -> list[dict[str, str]]:
    manifest = json.loads((CORPUS / "manifest.json").read_text(encoding="utf-8"))
    cases = []
    for case in manifest["cases"]:
        text = (CORPUS / case["file"]).read_text(encoding="utf-8")
        cases.append({"id": case["id"], "label": case["label"], "text": text})
    return cases


def _line_scan(text: str) -> int:
    return sum(1 for line in text.splitlines() if "rror" in line)


def _throughput(texts: list[str], func: object) -> float:
    assert callable(func)
    start = time.perf_counter()
    for text in texts:
        func(text)
    elapsed = time.perf_counter() - start
    return sum(len(t) for t in texts) / 1e6 / elapsed


_NAME = re.compile(r"'([A-Za-z_][\w./-]*)'|`([A-Za-z_][\w:]*)`|\"([A-Za-z_][\w./-]*)\"")


def _vary(line: str, rng: random.Random) -> str:
    """The same failure in another project: other names, numbers and paths."""

    def swap(match: re.Match[str]) -> str:
        quote = match.group(0)[0]
        end = "'" if quote == "'" else ("`" if quote == "`" else '"')
        return f"{quote}{rng.choice(WORDS)}_{rng.randrange(1000)}{end}"

    line = _NAME.sub(swap, line)
    return re.sub(r"\d+", lambda _: str(rng.randrange(10_000)), line)


def _build_store(
    path: Path, decisive_sets: list[tuple[str, list[str]]], rng: random.Random
) -> float:
    """100,000 failures. Normalising 400,000 lines would dominate the set-up, so each row
    varies its template's normalised words directly (a new name per row), and its signature
    is derived from those words."""
    templates = []
    for label, lines in decisive_sets:
        _, normalized = signature_of(lines)
        templates.append((label, lines, tokens_of(normalized)))
    rows = []
    now = time.time()
    for i in range(STORED):
        label, lines, tokens = templates[i % len(templates)]
        name = f"{rng.choice(WORDS).lower()}_{rng.randrange(1000)}"
        varied_tokens = [*tokens, name]
        fixed = rng.random() < 0.3
        rows.append(
            {
                "signature": f"{hash((tuple(varied_tokens), i % 7)) & (2**63 - 1):016x}",
                "tokens": varied_tokens,
                "decisive": [*lines[:3], f"name: {name}"],
                "category": label,
                "rule": "bench",
                "stage": "tests",
                "project": f"project-{rng.randrange(60)}",
                "created_at": now - rng.randrange(90 * 86400),
                "resolved_at": now if fixed else None,
                "fix_files": [f"src/{rng.choice(WORDS)}.py"] if fixed else [],
                "fix_suggestion": "check the path" if fixed else "",
            }
        )
    start = time.perf_counter()
    FailureMemory(path).bulk_insert(rows)
    return time.perf_counter() - start


def _p95(samples: list[float]) -> float:
    ordered = sorted(samples)
    return ordered[max(0, int(len(ordered) * 0.95) - 1)] * 1000


def _naive_query(conn: sqlite3.Connection, lines: list[str], limit: int = 3) -> list[int]:
    _, normalized = signature_of(lines)
    tokens = tokens_of(normalized)
    if not tokens:
        return []
    match = " OR ".join('"' + t.replace('"', '""') + '"' for t in tokens)
    rows = conn.execute(
        "SELECT rowid FROM failures_fts WHERE failures_fts MATCH ? ORDER BY bm25(failures_fts) "
        "LIMIT ?",
        (match, limit),
    ).fetchall()
    return [int(r[0]) for r in rows]


def _fuzzy_scan(conn: sqlite3.Connection, lines: list[str], limit: int = 3) -> list[int]:
    _, normalized = signature_of(lines)
    query = set(tokens_of(normalized))
    scored = []
    for row_id, tokens in conn.execute("SELECT id, tokens FROM failures"):
        words = set(tokens.split())
        union = len(query | words)
        if union:
            scored.append((len(query & words) / union, row_id))
    scored.sort(reverse=True)
    return [row_id for _, row_id in scored[:limit]]


class Queried(NamedTuple):
    """200 timed queries on one store: seconds each, the top-3 ids each, how many found a
    similar failure, and how many the store could not answer (a status other than ok)."""

    samples: list[float]
    top: list[tuple[int, ...]]
    hits: int
    unanswered: int


def _timed_queries(memory: FailureMemory, queries: Sequence[list[str]]) -> Queried:
    memory.query_similar(queries[0])  # warm the page cache, as a running loop would have
    samples, top = [], []
    hits = unanswered = 0
    for lines in queries:
        start = time.perf_counter()
        outcome = memory.query_similar(lines, limit=3)
        samples.append(time.perf_counter() - start)
        top.append(tuple(found.record.id for found in outcome.results))
        hits += bool(outcome.results)
        unanswered += outcome.status != "ok"
    return Queried(samples, top, hits, unanswered)


def _new_failures(decisive_sets: list[tuple[str, list[str]]]) -> list[tuple[str, list[str]]]:
    """200 failures not stored yet (the corpus's, varied), the same for both backends. An rng
    of their own, so that the other figures' inputs are those of earlier runs."""
    rng = random.Random(16)
    chosen = [decisive_sets[rng.randrange(len(decisive_sets))] for _ in range(QUERIES)]
    return [(label, [_vary(line, rng) for line in lines]) for label, lines in chosen]


def _timed_records(
    memory: FailureMemory, failures: list[tuple[str, list[str]]]
) -> tuple[list[float], int]:
    """Seconds each ``record_failure`` took, and how many stored nothing."""
    samples = []
    lost = 0
    for n, (label, lines) in enumerate(failures):
        start = time.perf_counter()
        stored = memory.record_failure(
            decisive=lines, category=label, stage="tests", project=f"project-{n % 60}",
            project_id=f"git:example.com/bench/project-{n % 60}", run_id=f"{n:016x}",
        )  # fmt: skip
        samples.append(time.perf_counter() - start)
        lost += stored is None
    return samples, lost


class PostgresRun(NamedTuple):
    """What was measured on Postgres."""

    copy_s: float
    read: int
    inserted: int
    queried: Queried
    records: list[float]
    lost: int


def _on_postgres(url: str, path: Path, queries: Sequence[list[str]],
                 failures: list[tuple[str, list[str]]]) -> PostgresRun:  # fmt: skip
    """Copy the SQLite store at ``path`` into the empty database at ``url`` (checked first, as
    ``loopctl memory copy`` does), then time the queries and the records there."""
    source, target = FailureMemory(path), FailureMemory(url)
    target.check_writable()
    start = time.perf_counter()
    read, inserted, *_suggestions = source.copy_to(target)
    copy_s = time.perf_counter() - start
    queried = _timed_queries(target, queries)
    records, lost = _timed_records(target, failures)
    return PostgresRun(copy_s, read, inserted, queried, records, lost)


class NoRun(NamedTuple):
    """Why there are no Postgres figures: no server (skipped), or one that failed us."""

    reason: str
    failed: bool = False


def _raise_exit(signum: int, _frame: FrameType | None) -> None:
    raise SystemExit(128 + signum)


@contextmanager
def _terminated_cleanly() -> Iterator[None]:
    """A SIGTERM meanwhile ends the benchmark through its ``finally`` blocks (which stop the
    server) rather than at once."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, _raise_exit)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _postgres(
    path: Path, queries: Sequence[list[str]], failures: list[tuple[str, list[str]]]
) -> PostgresRun | NoRun:
    """The Postgres measurements, or why there are none. The server (and the benchmark's
    database and role on it) is gone when this returns, whatever happened."""
    try:
        import psycopg  # noqa: F401 - only whether it imports
    except ImportError:
        return NoRun("psycopg is not installed: pip install 'loopctl-context-errors[postgres]'")
    if str(TESTS) not in sys.path:
        sys.path.append(str(TESTS))
    try:
        import pg_testkit  # type: ignore[import-not-found]
    except ImportError as exc:  # it needs pytest (for its fixtures)
        return NoRun(f"the Postgres test kit cannot be imported: {exc}")
    with _terminated_cleanly(), ExitStack() as stack:
        try:
            server = stack.enter_context(pg_testkit.running_server())
        except pg_testkit.PgUnavailable as exc:
            return NoRun(str(exc))
        except Exception as exc:  # noqa: BLE001 - initdb, pg_ctl or the role failed: say so
            return NoRun(_why_not(exc))
        database = stack.enter_context(pg_testkit.database(server))
        try:
            return _on_postgres(server.url(database), path, queries, failures)
        except StoreError as exc:  # a figure that fails, not a benchmark that stops
            return NoRun(f"the store failed: {one_line(str(exc))[:200]}", failed=True)
    raise AssertionError("unreachable")


def _why_not(exc: Exception) -> str:
    """A server that could not be started, in one line, without the superuser's password."""
    text = one_line(str(exc).splitlines()[0] if str(exc) else type(exc).__name__)
    admin = os.environ.get("LOOPCTL_TEST_POSTGRES_URL", "")
    if admin:
        try:
            text = parse_location(admin).scrub(text)
        except Exception:  # noqa: BLE001 - a malformed URL: say nothing of it
            text = type(exc).__name__
    return f"no PostgreSQL server could be started: {text[:200]}"


def _postgres_figures(
    run: PostgresRun | NoRun, sqlite: Queried, sqlite_records: list[float]
) -> list[Figure]:
    """The Postgres rows (``skipped`` with the reason when there was no server, ``FAILED``
    when it could not be used)."""
    names = (
        ("memory query p95 at 100k failures (postgres)", "ms", "<= 50 ms"),
        ("record p95 (postgres)", "ms", "<= 5 ms"),
        ("copy 100k failures to postgres", "s", ""),
    )
    if isinstance(run, NoRun):
        ok, said = (False, "FAILED") if run.failed else (None, "skipped")
        return [Figure(name, math.nan, unit, target, ok, f"{said}: {run.reason}")
                for name, unit, target in names]  # fmt: skip
    p95, base = _p95(run.queried.samples), _p95(sqlite.samples)
    same = sum(ours == theirs for ours, theirs in zip(run.queried.top, sqlite.top, strict=True))
    unanswered = f"; {run.queried.unanswered} unanswered" if run.queried.unanswered else ""
    record, record_base = _p95(run.records), _p95(sqlite_records)
    lost = f"; {run.lost} not stored" if run.lost else ""
    return [
        Figure(
            names[0][0], p95, "ms", names[0][2], p95 <= 50 and same == QUERIES,
            f"sqlite {base:.1f} ms (ratio {p95 / base:.1f}); same top-3 ids {same}/{QUERIES}; "
            f"{run.queried.hits}/{QUERIES} found similar{unanswered}",
        ),
        Figure(
            names[1][0], record, "ms", names[1][2], record <= 5 and not run.lost,
            f"sqlite {record_base:.2f} ms (ratio {record / record_base:.1f}); "
            f"{QUERIES} new failures into the 100k store{lost}",
        ),
        Figure(
            names[2][0], run.copy_s, "s", "", None,
            f"FailureMemory.copy_to (loopctl memory copy): {run.inserted} of {run.read} rows "
            "inserted, COPY batches of 5,000",
        ),
    ]  # fmt: skip


def figures() -> list[Figure]:
    rng = random.Random(20240501)
    cases = _cases()
    failing = [c for c in cases if c["label"] != "UNKNOWN"]
    out: list[Figure] = []

    # --- categorize throughput ------------------------------------------------------------
    for size, count in ((1_000_000, 12), (8_000_000, 3)):
        noise = _noise(size, rng)
        logs = [noise + "\n" + rng.choice(failing)["text"] for _ in range(count)]
        categorize(logs[0])  # warm-up (lazy regex compiles)
        speed = statistics.median(_throughput(logs, categorize) for _ in range(3))
        base = statistics.median(_throughput(logs, _line_scan) for _ in range(3))
        mb = size // 1_000_000
        out.append(
            Figure(
                f"categorize failing {mb} MB logs",
                speed,
                "MB/s",
                ">= 30 MB/s",
                speed >= 30,
                f"line scan {base:.0f} MB/s (ratio {speed / base:.2f})",
            )
        )
        if mb == 1:
            plain = [noise] * 4
            worst = statistics.median(_throughput(plain, categorize) for _ in range(3))
            out.append(
                Figure(
                    "categorize 1 MB, no recognisable error",
                    worst,
                    "MB/s",
                    "",
                    None,
                    f"worst case: every tier scans; line scan {base:.0f} MB/s",
                )
            )

    # --- the memory at 100,000 failures -----------------------------------------------------
    decisive_sets = []
    for case in cases:
        found = categorize(case["text"])
        if found.decisive_lines:
            decisive_sets.append((found.category.value, found.decisive_lines))
    with tempfile.TemporaryDirectory(prefix="loopctl-bench-memory-") as tmp:
        path = Path(tmp) / "failures.sqlite3"
        build_s = _build_store(path, decisive_sets, rng)
        memory = FailureMemory(path)
        queries = []
        for i in range(QUERIES):
            _label, lines = decisive_sets[rng.randrange(len(decisive_sets))]
            queries.append(lines if i % 4 == 0 else [_vary(line, rng) for line in lines])
        sqlite = _timed_queries(memory, queries)
        conn = sqlite3.connect(path)
        naive = []
        for lines in queries[:60]:
            start = time.perf_counter()
            _naive_query(conn, lines)
            naive.append(time.perf_counter() - start)
        fuzzy = []
        for lines in queries[:8]:
            start = time.perf_counter()
            _fuzzy_scan(conn, lines)
            fuzzy.append(time.perf_counter() - start)
        conn.close()
        p95, naive_p95, fuzzy_p95 = _p95(sqlite.samples), _p95(naive), _p95(fuzzy)
        out.append(
            Figure(
                "memory query p95 at 100k failures",
                p95,
                "ms",
                "<= 50 ms",
                p95 <= 50,
                f"naive all-words FTS5 {naive_p95:.1f} ms ({naive_p95 / p95:.1f}x), fuzzy scan "
                f"{fuzzy_p95:.0f} ms ({fuzzy_p95 / p95:.0f}x); "
                f"{sqlite.hits}/{QUERIES} found similar",
            )
        )
        beside_sqlite = len(out)  # the Postgres and record rows go here
        out.append(
            Figure(
                "build 100k-failure store",
                build_s,
                "s",
                "",
                None,
                "bulk_insert: one transaction, FTS5 triggers and uid index on",
            )
        )

        # --- a report for a 1 MB log, memory included ------------------------------------------
        noise = _noise(1_000_000, rng)
        logs = [noise + "\n" + rng.choice(failing)["text"] for _ in range(10)]
        samples = []
        for log in logs:
            start = time.perf_counter()
            report = build_report(log, memory=memory, stage="tests", iteration=3, goal="fix it")
            render_github(report)
            samples.append(time.perf_counter() - start)
        scan = statistics.median(
            (lambda t0: (_line_scan(log), time.perf_counter() - t0)[1])(time.perf_counter())
            for log in logs
        )
        worst_ms = max(samples) * 1000
        median_ms = statistics.median(samples) * 1000
        out.append(
            Figure(
                "report for a 1 MB log (100k memory)",
                median_ms,
                "ms",
                "<= 100 ms",
                worst_ms <= 100,
                f"max {worst_ms:.0f} ms; line scan of the log {scan * 1000:.1f} ms "
                f"(ratio {median_ms / (scan * 1000):.1f})",
            )
        )

        # --- the same store on Postgres, and recording into both -------------------------------
        failures = _new_failures(decisive_sets)
        on_postgres = _postgres(path, queries, failures)  # a copy of exactly the 100k rows
        sqlite_records, lost = _timed_records(memory, failures)
        query_row, *other_rows = _postgres_figures(on_postgres, sqlite, sqlite_records)
        sqlite_record = Figure(
            "record p95 (sqlite)",
            _p95(sqlite_records),
            "ms",
            "",
            None,
            f"{QUERIES} new failures into the 100k store: the Postgres row's baseline"
            + (f"; {lost} not stored" if lost else ""),
        )
        out[beside_sqlite:beside_sqlite] = [query_row, sqlite_record, *other_rows]
    return out


if __name__ == "__main__":
    print_table(figures())
