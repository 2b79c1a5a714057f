"""``loopctl errors …`` and ``loopctl memory …``: the plugin's commands.

``errors report`` categorizes any error output (a file, or ``-`` for stdin) and prints the
four-section report as terminal text, GitHub markdown or JSON; ``errors similar`` lists similar
past failures; ``errors rules`` shows the rules in precedence order. ``memory stats|search|prune``
look after the failure memory, ``memory migrate`` brings it to this loopctl's schema and ``memory
copy`` copies it into another (a SQLite file into a team's Postgres). Errors meant for the user
are one ``loopctl: error: …`` line: exit code 2 for a usage error, 1 when the memory cannot be
used.

``errors report`` is a :class:`loopctl.CliCommand`, run without typer
(:mod:`loopctl_context_errors.reportcmd`, which has the helpers all these commands share); the
others are typer commands. Registering them imports only typer (``loopctl --help`` and every
other plugin's command register them too); the rules, the report and the memory are imported by
the commands that use them.
"""

from __future__ import annotations

from typing import Annotated, Any, Optional

import typer

import loopctl
from loopctl_context_errors.reportcmd import (
    EXIT_STORE,
    EXIT_USAGE,
    MEMORY_HELP,
    SOURCE_HELP,
    InputError,
    open_memory,
    print_error,
    read_input,
)
from loopctl_context_errors.reportcmd import load_project as _project
from loopctl_context_errors.reportcmd import print_json as _print_json
from loopctl_context_errors.reportcmd import project_id_of as _project_id
from loopctl_context_errors.reportcmd import rules as _rules
from loopctl_context_errors.reportcmd import say as _say

JSON_HELP = "Print machine-readable JSON instead of text."

errors_app = typer.Typer(
    help="Categorize error output and report what failed, why, and what to try.",
    no_args_is_help=True,
)
memory_app = typer.Typer(
    help="The failure memory shared by every project: stats, search, prune, migrate, copy.",
    no_args_is_help=True,
)


def register(cli: Any) -> None:
    cli.add_typer(errors_app, name="errors")
    cli.add_typer(memory_app, name="memory")


def _fail(message: str) -> typer.Exit:
    print_error(message)
    return typer.Exit(EXIT_USAGE)


#: Statuses of a memory that cannot be used at all (not just slow or busy this time).
UNUSABLE = frozenset({"unavailable", "newer", "outdated"})
OFF = "the failure memory is off (LOOPCTL_FAILURE_MEMORY or the project's settings say so)"


def _memory(
    value: str | None,
    *,
    project: Any = None,
    trust_config: bool = False,
    read_only: bool = False,
) -> Any:
    """The memory ``--memory`` (or the environment and project) names; exits 2 when it is off,
    the URL is not one, or the project's config file names it and is not trusted."""
    try:
        memory = open_memory(value, project=project, trust_config=trust_config, read_only=read_only)
    except InputError as exc:
        raise _fail(f"--memory: {exc}" if value else str(exc)) from None
    except loopctl.UntrustedConfig as exc:
        raise _fail(str(exc)) from None
    if memory is None:
        raise _fail(OFF)
    return memory


def _store_failed(memory: Any, doing: str, exc: Exception) -> typer.Exit:
    """One line for a memory that could not be used (exit 1); never the store's raw text."""
    from loopctl_context_errors.memory import naming, one_line
    from loopctl_context_errors.store import StoreError

    if isinstance(exc, StoreError):
        message = naming(memory.location, one_line(str(exc)))
    else:
        message = f"{memory.display}: {type(exc).__name__}"
    print_error(f"cannot {doing} the failure memory: {memory.location.scrub(message)}")
    return typer.Exit(EXIT_STORE)


def _read_input(source: str) -> str:
    try:
        return read_input(source)
    except InputError as exc:
        raise _fail(str(exc)) from None


SourceArg = Annotated[str, typer.Argument(help=SOURCE_HELP)]
MemoryOpt = Annotated[Optional[str], typer.Option("--memory", metavar="FILE|URL", help=MEMORY_HELP)]
TrustOpt = Annotated[
    bool,
    typer.Option(loopctl.UntrustedConfig.FLAG, help=loopctl.UntrustedConfig.FLAG_HELP),
]


def examples(*lines: str) -> str:
    """A command's epilog: its example command lines, kept as written in the plain help."""
    return "\b\nExamples:\n" + "\n".join(f"  {line}" for line in lines)


@errors_app.command("similar", epilog=examples("pytest -q 2>&1 | loopctl errors similar --limit 3"))
def errors_similar(
    source: SourceArg = "-",
    limit: Annotated[int, typer.Option(help="How many to show.", min=1, max=50)] = 5,
    memory_path: MemoryOpt = None,
    as_json: Annotated[bool, typer.Option("--json", help=JSON_HELP)] = False,
    trust_config: TrustOpt = False,
) -> None:
    """Past failures similar to the given error output."""
    from loopctl_context_errors.categories import categorize

    text = _read_input(source)
    project = _project(trust_config=trust_config)
    found = categorize(text, rules=_rules(project))
    memory = _memory(memory_path, project=project, read_only=True)
    outcome = memory.query_similar(
        found.decisive_lines,
        limit=limit,
        category=found.category.value,
        project_id=_project_id(project),
    )
    if as_json:
        _print_json(
            {
                "category": found.category.value,
                "rule": found.rule_name,
                "memory": {
                    "location": memory.display,
                    **({"path": str(memory.path)} if memory.path is not None else {}),
                    "status": outcome.status,
                    **({"reason": outcome.reason} if outcome.reason else {}),
                    "duration_ms": outcome.duration_ms,
                },
                "similar_failures": [item.to_json() for item in outcome.results],
            }
        )
        return
    _say(
        f"{found.category.value} (rule {found.rule_name}); memory {memory.display}: "
        f"{outcome.status}"
    )
    if outcome.message:
        _say(f"({outcome.message})")
    if not outcome.results:
        print("No similar failures.")
    for item in outcome.results:
        record = item.record
        fix = (
            f"fixed: {', '.join(record.fix_files[:4]) or '?'}"
            + (f" — {record.fix_suggestion}" if record.fix_suggestion else "")
            if record.fixed
            else "not fixed"
        )
        head = record.decisive[-1] if record.decisive else ""
        _say(
            f"- [{item.match} {item.score:.2f}] #{record.id} {record.category} {item.place()}: "
            f"{head[:160]} ({fix})"
        )


@errors_app.command("rules", epilog=examples("loopctl errors rules", "loopctl errors rules --json"))
def errors_rules(as_json: Annotated[bool, typer.Option("--json", help=JSON_HELP)] = False) -> None:
    """The categorization rules, in precedence order."""
    rules = _rules().rules
    if as_json:
        _print_json(
            [
                {
                    "precedence": i,
                    "name": r.name,
                    "category": r.category.value,
                    "tier": int(r.tier),
                    "tier_name": r.tier.name.lower(),
                    "description": r.description,
                    "needles": list(r.needles),
                }
                for i, r in enumerate(rules, 1)
            ]
        )
        return
    for i, rule in enumerate(rules, 1):
        print(
            f"{i:3}. [{rule.tier.name.lower():8}] {rule.name:38} {rule.category.value:18} "
            f"{rule.description}"
        )


@memory_app.command("stats", epilog=examples("loopctl memory stats"))
def memory_stats(
    memory_path: MemoryOpt = None,
    as_json: Annotated[bool, typer.Option("--json", help=JSON_HELP)] = False,
    trust_config: TrustOpt = False,
) -> None:
    """How many failures the memory holds, by category and project, and how many were fixed."""
    memory = _memory(memory_path, trust_config=trust_config, read_only=True)
    try:
        stats = memory.stats()
    except Exception as exc:  # noqa: BLE001 - any failure is one line and exit 1, never a traceback
        raise _store_failed(memory, "read", exc) from None
    if as_json:
        _print_json(stats)
        return
    version = stats.get("schema_version")
    _say(
        f"Failure memory: {stats.get('location', memory.display)} "
        f"({stats.get('backend', memory.location.kind)}"
        + (f", schema {version}" if version is not None else "")
        + ")"
    )
    if not stats.get("exists", stats.get("failures")):
        print("  (empty: nothing recorded yet)")
        return
    print(
        f"  failures: {stats['failures']} (seen {stats['occurrences']} times), "
        f"fixed: {stats['fixed']}, size: {stats['size_bytes'] / 1024:.0f} KiB"
    )
    for category, count in stats["by_category"].items():
        _say(f"  {category:18} {count}")
    if stats["top_projects"]:
        _say(
            "  projects: "
            + ", ".join(f"{p['project']} ({p['failures']})" for p in stats["top_projects"])
        )
    print(
        f"  suggestions judged: {stats['suggestions_judged']}, "
        f"effective: {stats['suggestions_effective']}"
    )


@memory_app.command("search", epilog=examples('loopctl memory search "ModuleNotFoundError"'))
def memory_search(
    query: Annotated[list[str], typer.Argument(help="Error text to look for (or - for stdin).")],
    limit: Annotated[int, typer.Option(help="How many to show.", min=1, max=50)] = 10,
    memory_path: MemoryOpt = None,
    as_json: Annotated[bool, typer.Option("--json", help=JSON_HELP)] = False,
    trust_config: TrustOpt = False,
) -> None:
    """Stored failures like the given error text (exact signature, then rare words)."""
    text = _read_input("-") if query == ["-"] else " ".join(query)
    project = _project(trust_config=trust_config)
    memory = _memory(memory_path, project=project, read_only=True)
    lines = [line for line in text.splitlines() if line.strip()] or [text]
    outcome = memory.query_similar(lines, limit=limit, project_id=_project_id(project))
    if as_json:
        _print_json(
            {
                "location": memory.display,
                "status": outcome.status,
                **(
                    {"reason": outcome.reason, "message": outcome.message} if outcome.reason else {}
                ),
                "duration_ms": outcome.duration_ms,
                "ids": [item.record.id for item in outcome.results],
                "results": [item.to_json() for item in outcome.results],
            }
        )
        if outcome.status in UNUSABLE:
            raise typer.Exit(EXIT_STORE)
        return
    if outcome.status in UNUSABLE:
        print_error(f"cannot search the failure memory: {outcome.message or outcome.status}")
        raise typer.Exit(EXIT_STORE)
    if outcome.status not in ("ok", "missing"):
        _say(f"(the failure memory is {outcome.status}: {outcome.message})")
    if not outcome.results:
        print("No matching failures.")
    for item in outcome.results:
        record = item.record
        head = record.decisive[-1] if record.decisive else ""
        fixed = "fixed" if record.fixed else "open"
        _say(
            f"#{record.id} [{item.match} {item.score:.2f}] {record.category} "
            f"{item.place()} {fixed}: {head[:160]}"
        )


@memory_app.command(
    "prune",
    epilog=examples(
        "loopctl memory prune --older-than 90 --dry-run", "loopctl memory prune --keep 1000"
    ),
)
def memory_prune(
    older_than: Annotated[
        Optional[float],
        typer.Option("--older-than", metavar="DAYS", help="Delete failures not seen for DAYS."),
    ] = None,
    keep: Annotated[Optional[int], typer.Option(help="Keep only the N most recent.", min=0)] = None,
    project: Annotated[Optional[str], typer.Option(help="Only this project's failures.")] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Count, do not delete.")] = False,
    memory_path: MemoryOpt = None,
    as_json: Annotated[bool, typer.Option("--json", help=JSON_HELP)] = False,
    trust_config: TrustOpt = False,
) -> None:
    """Delete old failures (say what to delete: --older-than, --keep and/or --project)."""
    if older_than is None and keep is None and project is None:
        raise _fail("say what to prune: --older-than DAYS, --keep N and/or --project NAME")
    if older_than is not None and older_than < 0:
        raise _fail("--older-than: must be 0 or more days")
    memory = _memory(memory_path, trust_config=trust_config)
    try:
        count = memory.prune(
            older_than_days=older_than, keep=keep, project=project, dry_run=dry_run
        )
    except Exception as exc:  # noqa: BLE001 - any failure is one line and exit 1, never a traceback
        raise _store_failed(memory, "prune", exc) from None
    if as_json:
        _print_json(
            {
                **({"path": str(memory.path)} if memory.path is not None else {}),
                "location": memory.display,
                "deleted": 0 if dry_run else count,
                "matched": count,
                "dry_run": dry_run,
            }
        )
        return
    verb = "would delete" if dry_run else "deleted"
    _say(f"{verb} {count} failure(s) from {memory.display}")


@memory_app.command(
    "migrate",
    epilog=examples(
        "loopctl memory migrate --dry-run", "loopctl memory migrate --memory postgresql://db/mem"
    ),
)
def memory_migrate(
    memory_path: MemoryOpt = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Say what would change.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help=JSON_HELP)] = False,
    trust_config: TrustOpt = False,
) -> None:
    """Bring the memory to this loopctl's schema (a SQLite file is migrated on first use too;
    a shared Postgres only by this command)."""
    memory = _memory(memory_path, trust_config=trust_config)
    try:
        report = memory.migrate(dry_run=dry_run)
    except Exception as exc:  # noqa: BLE001 - any failure is one line and exit 1, never a traceback
        raise _store_failed(memory, "migrate", exc) from None
    if as_json:
        _print_json(
            {
                "location": memory.display,
                "from_version": report.from_version,
                "to_version": report.to_version,
                "rows": report.rows,
                "dry_run": report.dry_run,
            }
        )
        return
    if report.from_version is None:
        _say(f"{memory.display}: nothing stored yet (schema {report.to_version} on first use)")
    elif report.from_version == report.to_version:
        _say(f"{memory.display}: already at schema {report.to_version}")
    else:
        verb = "would migrate" if dry_run else "migrated"
        _say(
            f"{memory.display}: {verb} schema {report.from_version} → {report.to_version} "
            f"({report.rows} failure(s))"
        )


@memory_app.command(
    "copy", epilog=examples("loopctl memory copy --to postgresql://loop@db.example/mem")
)
def memory_copy(
    to: Annotated[str, typer.Option("--to", metavar="FILE|URL", help="The memory to copy into.")],
    memory_path: MemoryOpt = None,
    as_json: Annotated[bool, typer.Option("--json", help=JSON_HELP)] = False,
    trust_config: TrustOpt = False,
) -> None:
    """Copy every failure into another memory (a SQLite file into a team's Postgres). Failures
    the target holds already are skipped, so copying again adds nothing."""
    source = _memory(memory_path, trust_config=trust_config)
    target = _memory(to)
    if source.display == target.display:
        raise _fail("--to: that is the memory being copied")
    try:
        target.check_writable()  # a newer schema, or a shared one not migrated: refused
    except Exception as exc:  # noqa: BLE001 - any failure is one line and exit 1, never a traceback
        raise _store_failed(target, "copy into", exc) from None
    try:
        copied = source.copy_to(target)
    except Exception as exc:  # noqa: BLE001 - any failure is one line and exit 1, never a traceback
        raise _store_failed(target, "copy into", exc) from None
    if as_json:
        _print_json({"from": source.display, "to": target.display, **copied._asdict()})
        return
    read, inserted = copied.read, copied.inserted
    _say(
        f"copied {inserted} failure(s) of {read} from {source.display} to {target.display}"
        + (f" ({read - inserted} already there)" if read - inserted else "")
        + (
            f"; {copied.suggestions_added} judged suggestion(s) of {copied.suggestions_read}"
            if copied.suggestions_read
            else ""
        )
    )


__all__ = ["errors_app", "memory_app", "register"]
