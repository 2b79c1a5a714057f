"""Notes beside the goal: deduplicated, attributed, expiring when resolved, within a budget.

A note is something an iteration learned that the next one should know (a failing test, a
review remark, recovery guidance). The same note reported by several iterations is kept once
with a count; each keeps its source and the iteration it first came from. A note goes away when
it is resolved: a test-failure note when its test passes, any note when its source says so, and
(optionally) a note nobody reported again for a number of iterations. What is shown in the
prompt is capped by a character budget: the lowest-priority notes go first, and among equals
the oldest (the longest since anyone reported it), with a notice saying how many were left out.

Every iteration's changes are appended to ``notes.jsonl`` (one line, a ``put`` per changed note
and a ``del`` per removed one, no fsync), so a resumed loop continues with the same notes; the journal is compacted when it grows well past the notes
it describes. The per-iteration work is proportional to the notes that changed and the notes
shown, not to all notes kept, so a thousand accumulated notes cost no more than ten.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import attrs

import loopctl

#: Default note priority (0-100): lower goes first when the budget is reached.
DEFAULT_PRIORITY = 50
#: At most this many sources are named on a note's line.
MAX_SOURCES_SHOWN = 3
#: Room kept in the budget for the "left out" notice.
NOTICE_ROOM = 120
_MAX_KEY_CHARS = 300
_MAX_TESTS = 100
_MAX_TEST_ID_CHARS = 500
_MAX_SOURCE_CHARS = 80


@attrs.frozen
class Note:
    """A note for the prompt, returned by ``goal_guard_notes`` implementations.

    A plain dict with the same keys works too (so a plugin need not import this package), and
    so does a plain string (the text).
    """

    text: str
    #: Who reports it; filled in with the reporting plugin's name when empty.
    source: str = ""
    #: Identity for deduplication; by default the text with numbers, paths and times masked,
    #: so "took 3.1 s" and "took 4.0 s" count as the same note.
    key: str = ""
    #: 0-100; lower-priority notes are left out first when the budget is reached.
    priority: int = DEFAULT_PRIORITY
    #: Test ids this note is about: it expires when none of them fails any more.
    tests: tuple[str, ...] = ()
    #: Expires when the whole test command passes.
    until_pass: bool = False
    #: The source says the note is resolved: remove it (``key`` or ``text`` identifies it).
    resolved: bool = False
    #: Expires when not reported again for this many iterations (None: the config default).
    ttl_iterations: int | None = None


def _text(value: Any, limit: int) -> str | None:
    if not isinstance(value, str):
        return None
    return value if len(value) <= limit else value[: limit - 1] + "…"


def coerce_note(obj: Any, *, default_source: str, max_chars: int) -> Note | None:
    """A :class:`Note` from what a plugin returned (a Note, a mapping, or a string), with every
    field checked and bounded; None when it cannot be a note. Never raises."""
    try:
        if isinstance(obj, Note):
            fields: Mapping[str, Any] = attrs.asdict(obj, recurse=False)
        elif isinstance(obj, str):
            fields = {"text": obj}
        elif isinstance(obj, Mapping):
            fields = obj
        else:
            return None
        text = _text(fields.get("text", ""), max_chars)
        key = _text(fields.get("key") or "", _MAX_KEY_CHARS)
        resolved = fields.get("resolved") is True
        if text is None or key is None:
            return None
        text = text.strip("\n")
        if not text.strip() and not (resolved and key):
            return None
        source = _text(fields.get("source") or "", _MAX_SOURCE_CHARS) or default_source
        priority = fields.get("priority", DEFAULT_PRIORITY)
        if isinstance(priority, bool) or not isinstance(priority, (int, float)):
            priority = DEFAULT_PRIORITY
        priority = int(max(0, min(100, priority))) if priority == priority else DEFAULT_PRIORITY
        raw_tests = fields.get("tests") or ()
        if isinstance(raw_tests, str):
            raw_tests = (raw_tests,)
        tests: tuple[str, ...] = ()
        if isinstance(raw_tests, (list, tuple, set, frozenset)):
            tests = tuple(
                t[:_MAX_TEST_ID_CHARS] for t in list(raw_tests)[:_MAX_TESTS] if isinstance(t, str)
            )
        ttl = fields.get("ttl_iterations")
        if isinstance(ttl, bool) or not isinstance(ttl, int) or ttl < 1:
            ttl = None
        return Note(
            text=text,
            source=source,
            key=key,
            priority=priority,
            tests=tests,
            until_pass=fields.get("until_pass") is True,
            resolved=resolved,
            ttl_iterations=ttl,
        )
    except Exception:  # noqa: BLE001 - outside input (a plugin's odd object) never raises here
        return None


#: Texts already normalised: a note repeated every iteration costs one dict lookup.
_KEY_CACHE: dict[str, str] = {}
_KEY_CACHE_SIZE = 4096


def default_key(text: str) -> str:
    """``text:`` and the text with numbers, paths and times masked (cached: masking is the
    most expensive thing done per note)."""
    key = _KEY_CACHE.get(text)
    if key is None:
        from loopctl import normalize_line

        key = "text:" + normalize_line(text).casefold()[:_MAX_KEY_CHARS]
        if len(_KEY_CACHE) >= _KEY_CACHE_SIZE:
            _KEY_CACHE.clear()
        _KEY_CACHE[text] = key
    return key


def note_key(note: Note) -> str:
    """Explicit keys are namespaced by source; text keys are shared, so the same remark from
    two plugins is one note."""
    return f"{note.source}:{note.key}" if note.key else default_key(note.text)


@attrs.define(slots=True)
class NoteEntry:
    """A kept note: what it says, who reported it, since when, and how often."""

    key: str
    text: str
    source: str
    priority: int
    first_iteration: int
    last_iteration: int
    count: int = 1
    seq: int = 0
    sources: tuple[str, ...] = ()
    tests: frozenset[str] = frozenset()
    until_pass: bool = False
    ttl: int | None = None
    #: The rendered line, cached until the entry changes.
    line: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "op": "put",
            "key": self.key,
            "text": self.text,
            "source": self.source,
            "sources": list(self.sources),
            "priority": self.priority,
            "first": self.first_iteration,
            "last": self.last_iteration,
            "count": self.count,
            "seq": self.seq,
            "tests": sorted(self.tests),
            "until_pass": self.until_pass,
            "ttl": self.ttl,
        }

    def render(self) -> str:
        if self.line is None:
            names = self.sources[:MAX_SOURCES_SHOWN]
            more = len(self.sources) - len(names)
            who = ", ".join(names) + (f" +{more}" if more > 0 else "")
            seen = (
                f", seen {self.count}×, last in iteration {self.last_iteration}"
                if self.count > 1
                else ""
            )
            body = "\n  ".join(self.text.splitlines()) or self.text
            self.line = f"- {body} _({who}, iteration {self.first_iteration}{seen})_"
        return self.line


def entry_from_json(data: Mapping[str, Any]) -> NoteEntry | None:
    """A journal ``put`` line back as an entry; None when the line is damaged. Never raises."""
    try:
        key, text, source = data.get("key"), data.get("text"), data.get("source")
        if not all(isinstance(v, str) for v in (key, text, source)) or not key:
            return None
        ints = {}
        for name in ("priority", "first", "last", "count", "seq"):
            value = data.get(name)
            if isinstance(value, bool) or not isinstance(value, int):
                return None
            ints[name] = value
        sources = data.get("sources")
        tests = data.get("tests")
        ttl = data.get("ttl")
        return NoteEntry(
            key=str(key),
            text=str(text),
            source=str(source),
            priority=max(0, min(100, ints["priority"])),
            first_iteration=ints["first"],
            last_iteration=ints["last"],
            count=max(1, ints["count"]),
            seq=ints["seq"],
            sources=tuple(s for s in sources if isinstance(s, str))
            if isinstance(sources, list)
            else (str(source),),
            tests=frozenset(t for t in tests if isinstance(t, str))
            if isinstance(tests, list)
            else frozenset(),
            until_pass=data.get("until_pass") is True,
            ttl=ttl if isinstance(ttl, int) and not isinstance(ttl, bool) and ttl > 0 else None,
        )
    except Exception:  # noqa: BLE001 - a damaged journal line is skipped, never fatal
        return None


@attrs.frozen
class TestOutcome:
    """What the latest test run says about test-bound notes."""

    __test__ = False  # not a pytest test class

    passed: bool
    #: The failing test ids when the runner names them; None when it does not (nothing can be
    #: concluded about individual tests then).
    failing: frozenset[str] | None = None


@attrs.frozen
class Rendered:
    """The notes section body and what went into it."""

    body: str
    shown: int
    left_out: int
    total: int


class NoteBook:
    """The kept notes, indexed so that an iteration's work does not scan all of them."""

    def __init__(self, *, max_notes: int = 1000, default_ttl: int = 0) -> None:
        self.max_notes = max_notes
        self.default_ttl = default_ttl
        self.entries: dict[str, NoteEntry] = {}
        #: priority -> entries in the order they were last reported (oldest first).
        self._buckets: dict[int, dict[str, NoteEntry]] = {}
        self._test_bound: dict[str, NoteEntry] = {}
        self._until_pass: dict[str, NoteEntry] = {}
        self._own_ttl: dict[str, NoteEntry] = {}
        self._next_seq = 0
        #: Keys changed since the last :meth:`take_changes`, in order.
        self._changed: dict[str, None] = {}
        #: Bumped on every change, so renders can be cached.
        self.version = 0
        self._render_cache: tuple[int, int, Rendered] | None = None

    def __len__(self) -> int:
        return len(self.entries)

    def __contains__(self, key: object) -> bool:
        return key in self.entries

    # --- changes ---------------------------------------------------------------------------

    def _index(self, entry: NoteEntry) -> None:
        self.entries[entry.key] = entry
        self._buckets.setdefault(entry.priority, {})[entry.key] = entry
        if entry.tests:
            self._test_bound[entry.key] = entry
        if entry.until_pass:
            self._until_pass[entry.key] = entry
        if entry.ttl is not None:
            self._own_ttl[entry.key] = entry

    def _unindex(self, key: str) -> NoteEntry | None:
        entry = self.entries.pop(key, None)
        if entry is None:
            return None
        bucket = self._buckets.get(entry.priority)
        if bucket is not None:
            bucket.pop(key, None)
            if not bucket:
                del self._buckets[entry.priority]
        self._test_bound.pop(key, None)
        self._until_pass.pop(key, None)
        self._own_ttl.pop(key, None)
        return entry

    def _touched(self, key: str) -> None:
        self._changed[key] = None
        self.version += 1

    def report(self, note: Note, iteration: int) -> str:
        """Add ``note`` or count another sighting of it. Returns ``added``, ``seen`` (another
        iteration reported it), ``merged`` (reported again in the same iteration), ``resolved``
        or ``unknown`` (a resolution of a note not kept)."""
        key = note_key(note)
        if note.resolved:
            return "resolved" if self.remove(key) else "unknown"
        entry = self._unindex(key)
        if entry is None:
            entry = NoteEntry(
                key=key,
                text=note.text,
                source=note.source,
                priority=note.priority,
                first_iteration=iteration,
                last_iteration=iteration,
                seq=self._next_seq,
                sources=(note.source,),
                tests=frozenset(note.tests),
                until_pass=note.until_pass,
                ttl=note.ttl_iterations,
            )
            self._next_seq += 1
            outcome = "added"
        else:
            outcome = "merged" if entry.last_iteration == iteration else "seen"
            if outcome == "seen":
                entry.count += 1
            entry.last_iteration = max(entry.last_iteration, iteration)
            entry.text = note.text
            entry.priority = note.priority
            if note.source not in entry.sources:
                entry.sources = (*entry.sources, note.source)
            entry.tests = entry.tests | frozenset(note.tests) if note.tests else entry.tests
            entry.until_pass = entry.until_pass or note.until_pass
            if note.ttl_iterations is not None:
                entry.ttl = note.ttl_iterations
            entry.line = None
        self._index(entry)  # at the end of its bucket: the most recently reported
        self._touched(key)
        return outcome

    def remove(self, key: str) -> bool:
        if self._unindex(key) is None:
            return False
        self._touched(key)
        return True

    def expire(self, iteration: int, tests: TestOutcome | None) -> list[tuple[str, str]]:
        """Remove the notes that are resolved or stale now. Returns ``(key, why)`` pairs."""
        gone: list[tuple[str, str]] = []
        if tests is not None:
            if tests.passed:
                for key in list(self._test_bound) + list(self._until_pass):
                    if self.remove(key):
                        gone.append((key, "tests pass"))
            elif tests.failing:
                for key, entry in list(self._test_bound.items()):
                    if not entry.tests & tests.failing:
                        self.remove(key)
                        gone.append((key, "its tests pass"))
        for key, entry in list(self._own_ttl.items()):
            if entry.ttl is not None and iteration - entry.last_iteration >= entry.ttl:
                self.remove(key)
                gone.append((key, f"not reported for {entry.ttl} iterations"))
        if self.default_ttl > 0:
            for bucket in list(self._buckets.values()):
                for key, entry in list(bucket.items()):  # oldest first: stop at a fresh one
                    if entry.ttl is not None:
                        continue
                    if iteration - entry.last_iteration < self.default_ttl:
                        break
                    self.remove(key)
                    gone.append((key, f"not reported for {self.default_ttl} iterations"))
        return gone

    def evict_over_cap(self) -> list[str]:
        """Drop the lowest-priority, oldest notes beyond ``max_notes``."""
        evicted: list[str] = []
        while len(self.entries) > self.max_notes:
            lowest = min(self._buckets)
            key = next(iter(self._buckets[lowest]))
            self.remove(key)
            evicted.append(key)
        return evicted

    def take_changes(self) -> list[dict[str, Any]]:
        """Journal lines for what changed since the last call: a ``put`` per changed note, a
        ``del`` per removed one."""
        lines: list[dict[str, Any]] = []
        for key in self._changed:
            entry = self.entries.get(key)
            lines.append(entry.to_json() if entry is not None else {"op": "del", "key": key})
        self._changed.clear()
        return lines

    # --- the prompt --------------------------------------------------------------------------

    def keep_order(self) -> Iterable[NoteEntry]:
        """Most important first: higher priority, then the most recently reported."""
        for priority in sorted(self._buckets, reverse=True):
            yield from reversed(self._buckets[priority].values())

    def render(self, budget_chars: int) -> Rendered:
        """The notes that fit in ``budget_chars`` (priority order, then oldest first), listed
        chronologically, and a notice when some were left out."""
        cached = self._render_cache
        if cached is not None and cached[0] == self.version and cached[1] == budget_chars:
            return cached[2]
        room = budget_chars - NOTICE_ROOM
        kept: list[NoteEntry] = []
        used = 0
        for entry in self.keep_order():
            cost = len(entry.render()) + 1
            if used + cost > room:
                break
            kept.append(entry)
            used += cost
        kept.sort(key=lambda e: (-e.priority, e.first_iteration, e.seq))
        left_out = len(self.entries) - len(kept)
        lines = [entry.render() for entry in kept]
        if left_out:
            lines.append(
                f"_{left_out} older or lower-priority note{'s' if left_out != 1 else ''} "
                f"left out to keep this section within {budget_chars} characters._"
            )
        rendered = Rendered("\n".join(lines), len(kept), left_out, len(self.entries))
        self._render_cache = (self.version, budget_chars, rendered)
        return rendered

    # --- persistence -------------------------------------------------------------------------

    def load_lines(self, lines: Iterable[Mapping[str, Any]]) -> int:
        """Replay journal lines (tolerantly). Returns how many lines were unusable."""
        bad = 0
        for line in _expand_batches(lines):
            op = line.get("op") if isinstance(line, Mapping) else None
            if op == "put":
                entry = entry_from_json(line)
                if entry is None:
                    bad += 1
                    continue
                self._unindex(entry.key)
                self._index(entry)
                self._next_seq = max(self._next_seq, entry.seq + 1)
            elif op == "del" and isinstance(line.get("key"), str):
                self._unindex(str(line["key"]))
            else:
                bad += 1
        for priority, bucket in list(self._buckets.items()):
            ordered = sorted(bucket.values(), key=lambda e: (e.last_iteration, e.seq))
            self._buckets[priority] = {e.key: e for e in ordered}
        self._changed.clear()
        self.version += 1
        return bad

    def snapshot_lines(self) -> list[dict[str, Any]]:
        """Every kept note as a ``put`` line, oldest first: a compacted journal."""
        entries = sorted(self.entries.values(), key=lambda e: (e.last_iteration, e.seq))
        return [entry.to_json() for entry in entries]


def _expand_batches(lines: Iterable[Any]) -> Iterable[Any]:
    """Journal lines with each ``batch`` line (one iteration's changes) replaced by its ops."""
    for line in lines:
        if isinstance(line, Mapping) and line.get("op") == "batch":
            ops = line.get("ops")
            yield from ops if isinstance(ops, list) else [None]
        else:
            yield line


def _journal_bytes(lines: Iterable[Mapping[str, Any]]) -> bytes:
    """JSON lines, ASCII-only (escapes keep any text exact, lone surrogates included), with
    secrets redacted (a note may quote test output)."""
    return loopctl.redact(
        "".join(json.dumps(line, ensure_ascii=True, separators=(",", ":")) + "\n" for line in lines)
    ).encode("ascii")


class NoteJournal:
    """``notes.jsonl``: each iteration's changes appended in one write (no fsync: losing the
    last lines to a power cut loses only what the iteration in flight learned), compacted by an
    atomic rewrite when it grows. Read back tolerantly: torn and damaged lines are skipped."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._fd: int | None = None
        self.lines = 0

    def read_into(self, book: NoteBook) -> tuple[int, list[str]]:
        """Replay the journal into ``book``; returns (unusable ops, problems)."""
        read = loopctl.read_jsonl(self.path)
        self.lines = sum(1 for _ in _expand_batches(read.records))
        return book.load_lines(read.records), list(read.problems)

    def reset(self, book: NoteBook | None = None) -> None:
        """Rewrite the journal with ``book``'s notes (empty without one), atomically."""
        self.close()
        lines = book.snapshot_lines() if book is not None else []
        self.path.parent.mkdir(parents=True, exist_ok=True)
        loopctl.atomic_write_text(self.path, _journal_bytes(lines).decode("ascii"))
        self.lines = len(lines)

    def append(self, lines: list[dict[str, Any]], book: NoteBook) -> bool:
        """Append ``lines`` (one iteration's changes) as one ``batch`` line, so one iteration
        costs one encode and one write, and a torn write loses only that iteration; compact
        instead when the journal holds over four times the ops of the notes it describes.
        Returns True when it compacted."""
        if not lines:
            return False
        if self.lines + len(lines) > 4 * len(book) + 256:
            self.reset(book)
            return True
        data = _journal_bytes([{"op": "batch", "ops": lines}])
        if self._fd is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._fd = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o666)
            size = os.fstat(self._fd).st_size
            if size and os.pread(self._fd, 1, size - 1) != b"\n":
                data = b"\n" + data  # a torn last line (a killed writer): start clean
        view = memoryview(data)
        while view:
            view = view[os.write(self._fd, view) :]
        self.lines += len(lines)
        return False

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


__all__ = [
    "Note",
    "NoteBook",
    "NoteEntry",
    "NoteJournal",
    "Rendered",
    "TestOutcome",
    "coerce_note",
    "default_key",
    "note_key",
]
