"""How the failure memory ranks: which stored failures are like a new one, best first.

Everything that decides the order happens here, in Python, from integers a
:class:`~loopctl_context_errors.store.Store` returns alike on every backend (row ids, each word's
document frequency, the number of rows), so the same query over the same rows gives the same
failures in the same order on SQLite and Postgres:

1. exact matches: the same signature, one per project group (this project's, the others'),
   fixed first, then the latest seen, then the highest id; their occurrences summed;
2. the failure's few rarest words (:data:`RARE_TOKENS`, within :data:`RARE_BUDGET` rows);
3. the candidate window: the newest :data:`RANKED_ROWS` rows holding any of them, scored by the
   words' IDF (BM25 with b = 0), the newest first among equals;
4. the best :data:`CANDIDATES` of each project group re-ranked by word overlap (Jaccard), the
   same category and a known fix; one per signature;
5. this project's exact and similar ones, then the other projects'.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import NamedTuple

from loopctl_context_errors.store import NO_RUN, Candidate, Store, StoredRow

#: How many of a failure's rarest words the similarity query uses.
RARE_TOKENS = 4
#: At most about this many stored rows may match the rare words (the first word always counts).
RARE_BUDGET = 1500
#: Rows scored at most: the newest the rare words match (the candidate window). Scoring costs
#: time per row, and the rarest word always goes, so without this bound a word every stored
#: failure shares would make each query (one per new failure) slower as the store grows.
RANKED_ROWS = 300
#: How many of the best-scored candidates of each project group are re-ranked.
CANDIDATES = 40
#: Candidates whose word overlap (Jaccard) is below this are not "similar".
MIN_SIMILARITY = 0.3


class Hit(NamedTuple):
    """A stored failure the query found: its row, how alike, and which project group."""

    row: StoredRow
    #: 0–1: 1 for the same signature, else the word overlap after re-ranking.
    score: float
    #: "exact" (same signature) or "similar".
    match: str
    same_project: bool
    #: Times seen: an exact match's rows of its group summed.
    occurrences: int


def rank(
    store: Store,
    signature: str,
    query_tokens: set[str],
    limit: int,
    category: str | None,
    exclude_run: str,
    project_id: str,
    deadline: float,
) -> list[Hit]:
    """Up to ``limit`` failures like the one with ``signature`` and words ``query_tokens``:
    this project's exact and similar ones, then other projects' (a query naming no project has
    one group)."""
    if not signature or limit <= 0:
        return []
    exclude_run = exclude_run or NO_RUN
    exact = _distinct_exact(store.exact(signature, exclude_run, deadline), project_id)
    similar: dict[bool, list[Hit]] = {True: [], False: []}
    if query_tokens and limit > sum(len(group) for group in exact.values()):
        similar = _similar(
            store, signature, query_tokens, category, exclude_run, project_id, limit, deadline
        )
    found = exact[True] + similar[True] + exact[False] + similar[False]
    return found[:limit]


def _is_same(project_id: str, row_project: str) -> bool:
    return not project_id or row_project == project_id


def _distinct_exact(rows: Sequence[StoredRow], project_id: str) -> dict[bool, list[Hit]]:
    """One exact match per project group (this project, the others): the first of its rows
    (fixed first, then the latest seen, then the highest id), with their occurrences summed."""
    found: dict[bool, list[Hit]] = {True: [], False: []}
    for same in (True, False):
        group = [row for row in rows if _is_same(project_id, row.project_id) == same]
        if group:
            total = sum(int(row.occurrences) for row in group)
            found[same].append(Hit(group[0], 1.0, "exact", same, total))
    return found


def _idf(total: int, df: int) -> float:
    """FTS5's (BM25's) inverse document frequency of a word in ``df`` of ``total`` rows."""
    return max(1e-6, math.log((total - df + 0.5) / (df + 0.5)))


def _rarest(df: Mapping[str, int]) -> list[str]:
    """Up to RARE_TOKENS of the rarest known words, while the rows they can match stay within
    RARE_BUDGET (the rarest word always goes)."""
    known = sorted((int(count), term) for term, count in df.items() if int(count) > 0)
    picked: list[str] = []
    matched = 0
    for count, term in known[:RARE_TOKENS]:
        if picked and matched + count > RARE_BUDGET:
            break
        picked.append(term)
        matched += count
    return picked


def _similar(
    store: Store,
    signature: str,
    query_tokens: set[str],
    category: str | None,
    exclude_run: str,
    project_id: str,
    limit: int,
    deadline: float,
) -> dict[bool, list[Hit]]:
    """The most similar failures of each project group (none with the query's signature)."""
    total, df = store.term_stats(sorted(query_tokens)[:200], deadline)
    rare = _rarest(df)
    found: dict[bool, list[Hit]] = {True: [], False: []}
    if not rare:
        return found
    groups = _top_candidates(store, _scored_window(store, rare, total, df, deadline),
                             exclude_run, project_id, deadline)  # fmt: skip
    winners: list[tuple[bool, float, int]] = []
    for same in (True, False):
        ranked = _ranked(groups[same], query_tokens, category)
        winners += [
            (same, score, row_id) for score, row_id in _best_distinct(ranked, {signature}, limit)
        ]
    if not winners:
        return found
    records = {row.id: row for row in store.rows([row_id for _, _, row_id in winners], deadline)}
    for same, score, row_id in winners:
        if row_id in records:
            row = records[row_id]
            found[same].append(Hit(row, score, "similar", same, int(row.occurrences)))
    return found


def _scored_window(
    store: Store, rare: Sequence[str], total: int, df: Mapping[str, int], deadline: float
) -> list[int]:
    """The ids of the newest :data:`RANKED_ROWS` rows holding a rare word, best first: by the
    summed IDF of the rare words each holds (BM25 with b = 0; each word is in a row once), the
    newest first among equals."""
    score: dict[int, float] = {}
    for term in rare:  # the same order, so the same float sums, on every backend
        weight = _idf(total, df[term])
        for row_id in store.postings([term], RANKED_ROWS, deadline):
            score[row_id] = score.get(row_id, 0.0) + weight
    window = sorted(score, reverse=True)[:RANKED_ROWS]
    return sorted(window, key=lambda row_id: (-score[row_id], -row_id))


def _top_candidates(
    store: Store, ranked_ids: Sequence[int], exclude_run: str, project_id: str, deadline: float
) -> dict[bool, list[Candidate]]:
    """The first :data:`CANDIDATES` of ``ranked_ids`` in each project group (this project's,
    the others'), fetched in order until both groups are full."""
    groups: dict[bool, list[Candidate]] = {True: [], False: []}
    step = CANDIDATES * (2 if project_id else 1)
    for start in range(0, len(ranked_ids), step):
        batch = ranked_ids[start : start + step]
        fetched = {c.id: c for c in store.candidates(batch, exclude_run, deadline)}
        for row_id in batch:
            candidate = fetched.get(row_id)
            if candidate is None:
                continue
            group = groups[_is_same(project_id, candidate.project_id)]
            if len(group) < CANDIDATES:
                group.append(candidate)
        if all(
            len(groups[same]) >= CANDIDATES for same in ((True, False) if project_id else (True,))
        ):
            break
        step = 100
    return groups


def _similarity(query_tokens: set[str], candidate: Candidate, category: str | None) -> float | None:
    """Word overlap (Jaccard), plus 0.1 for the same category and 0.1 for a known fix, capped
    below an exact match's 1.0; None below :data:`MIN_SIMILARITY`."""
    words = set(str(candidate.tokens).split())
    union = len(query_tokens | words)
    overlap = len(query_tokens & words) / union if union else 0.0
    if overlap < MIN_SIMILARITY:
        return None
    score = overlap
    if category and candidate.category == category:
        score += 0.1
    if candidate.resolved_at is not None:
        score += 0.1
    return min(score, 0.99)


def _ranked(
    candidates: Iterable[Candidate], query_tokens: set[str], category: str | None
) -> list[tuple[float, Candidate]]:
    """The candidates similar enough: best score first, then the latest seen, then the
    highest id."""
    scored: list[tuple[float, Candidate]] = []
    for candidate in candidates:
        score = _similarity(query_tokens, candidate, category)
        if score is not None:
            scored.append((score, candidate))
    scored.sort(key=lambda item: (-item[0], -float(item[1].last_seen), -int(item[1].id)))
    return scored


def _best_distinct(
    ranked: Iterable[tuple[float, Candidate]], taken: set[str], wanted: int
) -> list[tuple[float, int]]:
    """``(score, id)`` of the first ``wanted`` ranked candidates, one per signature, none with
    a signature in ``taken``."""
    taken = set(taken)
    winners: list[tuple[float, int]] = []
    for score, candidate in ranked:
        if len(winners) >= wanted:
            break
        if candidate.signature not in taken:
            taken.add(candidate.signature)
            winners.append((score, int(candidate.id)))
    return winners


__all__ = [
    "CANDIDATES",
    "MIN_SIMILARITY",
    "RANKED_ROWS",
    "RARE_BUDGET",
    "RARE_TOKENS",
    "Hit",
    "rank",
]
