"""The plugin's settings: ``[plugins.context-errors]`` in loopctl.toml (or pyproject.toml)."""

from __future__ import annotations

import attrs


@attrs.define(kw_only=True)
class ContextErrorsConfig:
    """Every field has a default, so the section is optional."""

    #: Use the failure memory shared across projects (set false to keep nothing).
    memory: bool = True
    #: Where the memory lives; "" means LOOPCTL_FAILURE_MEMORY or the XDG default, "off" turns
    #: it off. The environment variable, when set, wins over this key.
    memory_path: str = ""
    #: A Postgres memory a team shares (``postgresql://user@host/db``; keep the password in
    #: PGPASSWORD or ~/.pgpass). Wins over ``memory_path``; LOOPCTL_FAILURE_MEMORY wins over it.
    memory_url: str = attrs.field(default="", repr=False)
    #: Hard limit on one memory query, seconds (the seed's 5 s).
    memory_timeout_s: float = 5.0
    #: Stored failures kept at most (the oldest go first, at the end of a run).
    memory_max_records: int = 200_000
    #: How many similar past failures a report shows.
    max_similar: int = 3
    #: Write context-error-<stage>.md into the state directory.
    save_reports: bool = True
    #: Size budget of the "Historical Context" prompt section, characters.
    prompt_budget_chars: int = 1500
    #: Priority of that section (the goal is 100, the last test run 70).
    prompt_priority: int = 60
    #: The project's name shown beside its failures; "" means the repository's (else the
    #: working directory's) name.
    project: str = ""
    #: The project's identity in the memory; "" means its remote, else its root commit, else
    #: its path (set it for a monorepo's services, or a repository that moved).
    project_id: str = ""
    #: The issue the run works on (``#42`` or a URL), shown in reports.
    issue: str = ""

    def __attrs_post_init__(self) -> None:
        problems: list[tuple[tuple[str, ...], str]] = []
        if not 0 < self.memory_timeout_s <= 60:
            problems.append((("memory_timeout_s",), "must be more than 0 and at most 60"))
        if self.memory_max_records < 100:
            problems.append((("memory_max_records",), "must be at least 100"))
        if not 0 <= self.max_similar <= 10:
            problems.append((("max_similar",), "must be between 0 and 10"))
        if self.prompt_budget_chars < 200:
            problems.append((("prompt_budget_chars",), "must be at least 200"))
        if not 0 <= self.prompt_priority <= 100:
            problems.append((("prompt_priority",), "must be between 0 and 100"))
        url_problem = _url_problem(self.memory_url)
        if url_problem:
            problems.append((("memory_url",), url_problem))
        if problems:
            # imported here: the config package's errors would cost the start-up of `loopctl
            # errors report` even when there is nothing to report
            from loopctl import InvalidFields

            raise InvalidFields(problems)


def _url_problem(value: str) -> str:
    """Why ``value`` is not a ``memory_url`` at all ("" when it is one, or is empty).

    A ``postgresql://`` URL that does not parse is not refused here: like a server that is
    down, it costs the run its memory (one warning line says why), not the run."""
    if not value.strip():
        return ""
    from loopctl_context_errors.store import is_url

    if not is_url(value):
        return "must be a postgresql:// URL (a file goes in memory_path)"
    query = value.partition("?")[2].partition("#")[0]
    if any("%" in pair.partition("=")[0] for pair in query.split("&")):
        # libpq decodes them (%70assword is a password), the redactor of `config show` and
        # the state files reads them as written: refused, so that no secret shows
        return "must name its query settings plainly (password=, not %70assword=)"
    return ""


__all__ = ["ContextErrorsConfig"]
