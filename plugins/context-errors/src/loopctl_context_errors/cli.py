"""``loopctl errors …`` and ``loopctl memory …``: the plugin's commands.

``errors report`` categorizes any error output (a file, or ``-`` for stdin) and prints the
four-section report as terminal text, GitHub markdown or JSON; ``errors similar`` lists similar
past failures; ``errors rules`` shows the rules in precedence order. ``memory stats|search|prune``
look after the failure memory. Errors meant for the user are one ``loopctl: error: …`` line and
exit code 2.

Registering the commands imports only typer (``loopctl --help`` and every other plugin's command
register them too); the rules, the report and the memory are imported by the commands that use
them.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Optional

import typer

import loopctl

if TYPE_CHECKING:
    from loopctl_context_errors.memory import FailureMemory

EXIT_USAGE = 2
FORMATS = ("terminal", "github", "json")
JSON_HELP = "Print machine-readable JSON instead of text."
MEMORY_HELP = (
    "The failure memory file (default: LOOPCTL_FAILURE_MEMORY, the project's memory_path "
    "setting, or $XDG_DATA_HOME/loopctl/failures.sqlite3)."
)

errors_app = typer.Typer(
    help="Categorize error output and report what failed, why, and what to try.",
    no_args_is_help=True,
)
memory_app = typer.Typer(
    help="The failure memory shared by every project: stats, search, prune.",
    no_args_is_help=True,
)


def register(cli: Any) -> None:
    cli.add_typer(errors_app, name="errors")
    cli.add_typer(memory_app, name="memory")


def _fail(message: str) -> typer.Exit:
    for line in message.strip().splitlines() or ["unknown error"]:
        print(f"loopctl: error: {line}", file=sys.stderr)
    return typer.Exit(EXIT_USAGE)


def _say(line: str) -> None:
    """Print a line built from stored or logged text: redacted, no terminal control."""
    print(loopctl.sanitize(loopctl.redact(line)))


def _print_json(data: Any) -> None:
    """JSON for the terminal: C0 controls are escaped by JSON; the C1 ones and DEL, which JSON
    leaves raw, are removed."""
    print(loopctl.sanitize(json.dumps(data, indent=2, default=str, ensure_ascii=False)))


def _read_input(source: str) -> str:
    if source == "-":
        data = sys.stdin.buffer.read()
    else:
        path = Path(source)
        if not path.exists():
            raise _fail(f"{source}: no such file (give a log file, or - to read stdin)")
        if path.is_dir():
            raise _fail(f"{source}: is a directory, not a log file")
        try:
            data = path.read_bytes()
        except OSError as exc:
            raise _fail(f"{source}: cannot read it: {exc.strerror or exc}") from None
    return data.decode("utf-8", "replace")


def _project() -> Any:
    """The project in the working directory, or None when it cannot be loaded: a broken
    project config must not break these commands. A command loads it once and passes it on."""
    try:
        from loopctl import load_project

        return load_project()
    except Exception:  # noqa: BLE001 - see above
        return None


def _configured_memory_path(project: Any) -> str:
    """The ``memory_path`` setting of ``project``, if any."""
    if project is None:
        return ""
    try:
        from loopctl_context_errors.config import ContextErrorsConfig

        config = project.plugin_config("context-errors", ContextErrorsConfig)
    except Exception:  # noqa: BLE001 - a broken project config must not break these commands
        return ""
    return "off" if not config.memory else config.memory_path


def _memory(
    path: str | None, *, timeout_s: float = 5.0, project: Any = None
) -> FailureMemory | None:
    """The failure memory at ``path``, else the one the project (loaded if not given) names."""
    from loopctl_context_errors.memory import FailureMemory, resolve_memory_path

    if path:
        resolved = resolve_memory_path(path, env={})
    else:
        project = project if project is not None else _project()
        resolved = resolve_memory_path(_configured_memory_path(project))
    return None if resolved is None else FailureMemory(resolved, timeout_s=timeout_s)


def _rules(project: Any = None) -> Any:
    """Built-in rules plus those of the project's enabled plugins (best effort)."""
    from loopctl_context_errors.categories import BUILTIN_RULES, Rule, RuleSet

    try:
        project = project if project is not None else _project()
        hook = getattr(project.hook, "context_errors_rules", None) if project else None
        results = hook() if hook is not None else []
    except Exception:  # noqa: BLE001
        results = []
    taken = {rule.name for rule in BUILTIN_RULES}
    extra = []
    for result in results or []:
        for rule in result if isinstance(result, (list, tuple)) else [result]:
            if isinstance(rule, Rule) and rule.name not in taken:
                taken.add(rule.name)
                extra.append(rule)
    return RuleSet.with_extra(extra)


SourceArg = Annotated[
    str, typer.Argument(help="The error output: a file, or - for standard input.")
]
MemoryOpt = Annotated[Optional[str], typer.Option("--memory", metavar="FILE", help=MEMORY_HELP)]


def examples(*lines: str) -> str:
    """A command's epilog: its example command lines, kept as written in the plain help."""
    return "\b\nExamples:\n" + "\n".join(f"  {line}" for line in lines)


@errors_app.command(
    "report",
    epilog=examples(
        "pytest -q 2>&1 | loopctl errors report", "loopctl errors report test.log -f github"
    ),
)
def errors_report(
    source: SourceArg = "-",
    output_format: Annotated[
        str,
        typer.Option(
            "--format", "-f", metavar="terminal|github|json", help="terminal, github or json."
        ),
    ] = "terminal",
    stage: Annotated[str, typer.Option(help="The stage that failed.")] = "tests",
    iteration: Annotated[Optional[int], typer.Option(help="The iteration number.")] = None,
    goal: Annotated[str, typer.Option(help="The goal, shown in the report.")] = "",
    issue: Annotated[str, typer.Option(help="The issue (#42 or a URL).")] = "",
    memory_path: MemoryOpt = None,
    no_memory: Annotated[
        bool, typer.Option("--no-memory", help="Do not consult the failure memory.")
    ] = False,
) -> None:
    """Categorize error output and print the four-section report."""
    if output_format not in FORMATS:
        raise _fail(f"--format: must be one of {', '.join(FORMATS)}, got {output_format!r}")
    from loopctl_context_errors.report import (
        build_report,
        render_github,
        render_json,
        render_terminal,
    )

    text = _read_input(source)
    project = _project()
    memory = None if no_memory else _memory(memory_path, project=project)
    report = build_report(
        text,
        stage=stage,
        iteration=iteration,
        goal=goal,
        issue=issue,
        memory=memory,
        rules=_rules(project),
    )
    if output_format == "json":
        _print_json(render_json(report))
    elif output_format == "github":
        sys.stdout.write(loopctl.sanitize(render_github(report)))
    else:
        sys.stdout.write(render_terminal(report))  # sanitised inside, before the colours


@errors_app.command("similar", epilog=examples("pytest -q 2>&1 | loopctl errors similar --limit 3"))
def errors_similar(
    source: SourceArg = "-",
    limit: Annotated[int, typer.Option(help="How many to show.", min=1, max=50)] = 5,
    memory_path: MemoryOpt = None,
    as_json: Annotated[bool, typer.Option("--json", help=JSON_HELP)] = False,
) -> None:
    """Past failures similar to the given error output."""
    from loopctl_context_errors.categories import categorize

    text = _read_input(source)
    project = _project()
    found = categorize(text, rules=_rules(project))
    memory = _memory(memory_path, project=project)
    if memory is None:
        raise _fail("the failure memory is off (LOOPCTL_FAILURE_MEMORY or memory_path says so)")
    outcome = memory.query_similar(found.decisive_lines, limit=limit, category=found.category.value)
    if as_json:
        _print_json(
            {
                "category": found.category.value,
                "rule": found.rule_name,
                "memory": {
                    "path": str(memory.path),
                    "status": outcome.status,
                    "duration_ms": outcome.duration_ms,
                },
                "similar_failures": [item.to_json() for item in outcome.results],
            }
        )
        return
    print(
        f"{found.category.value} (rule {found.rule_name}); memory {memory.path}: {outcome.status}"
    )
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
            f"- [{item.match} {item.score:.2f}] #{record.id} {record.category} {record.project}: "
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
) -> None:
    """How many failures the memory holds, by category and project, and how many were fixed."""
    memory = _memory(memory_path)
    if memory is None:
        raise _fail("the failure memory is off (LOOPCTL_FAILURE_MEMORY or memory_path says so)")
    try:
        stats = memory.stats()
    except Exception as exc:  # noqa: BLE001
        raise _fail(f"{memory.path}: cannot read the failure memory: {exc}") from None
    if as_json:
        _print_json(stats)
        return
    print(f"Failure memory: {stats['path']}")
    if not stats.get("exists"):
        print("  (empty: nothing recorded yet)")
        return
    print(
        f"  failures: {stats['failures']} (seen {stats['occurrences']} times), "
        f"fixed: {stats['fixed']}, size: {stats['size_bytes'] / 1024:.0f} KiB"
    )
    for category, count in stats["by_category"].items():
        print(f"  {category:18} {count}")
    if stats["top_projects"]:
        print(
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
) -> None:
    """Stored failures like the given error text (exact signature, then rare words)."""
    text = _read_input("-") if query == ["-"] else " ".join(query)
    memory = _memory(memory_path)
    if memory is None:
        raise _fail("the failure memory is off (LOOPCTL_FAILURE_MEMORY or memory_path says so)")
    lines = [line for line in text.splitlines() if line.strip()] or [text]
    outcome = memory.query_similar(lines, limit=limit)
    if as_json:
        _print_json(
            {
                "status": outcome.status,
                "duration_ms": outcome.duration_ms,
                "results": [item.to_json() for item in outcome.results],
            }
        )
        return
    if outcome.status not in ("ok", "missing"):
        print(f"(the failure memory is {outcome.status})")
    if not outcome.results:
        print("No matching failures.")
    for item in outcome.results:
        record = item.record
        head = record.decisive[-1] if record.decisive else ""
        fixed = "fixed" if record.fixed else "open"
        _say(
            f"#{record.id} [{item.match} {item.score:.2f}] {record.category} "
            f"{record.project} {fixed}: {head[:160]}"
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
) -> None:
    """Delete old failures (say what to delete: --older-than, --keep and/or --project)."""
    if older_than is None and keep is None and project is None:
        raise _fail("say what to prune: --older-than DAYS, --keep N and/or --project NAME")
    if older_than is not None and older_than < 0:
        raise _fail("--older-than: must be 0 or more days")
    memory = _memory(memory_path)
    if memory is None:
        raise _fail("the failure memory is off (LOOPCTL_FAILURE_MEMORY or memory_path says so)")
    try:
        count = memory.prune(
            older_than_days=older_than, keep=keep, project=project, dry_run=dry_run
        )
    except Exception as exc:  # noqa: BLE001
        raise _fail(f"{memory.path}: cannot prune the failure memory: {exc}") from None
    if as_json:
        _print_json(
            {
                "path": str(memory.path),
                "deleted": 0 if dry_run else count,
                "matched": count,
                "dry_run": dry_run,
            }
        )
        return
    verb = "would delete" if dry_run else "deleted"
    print(f"{verb} {count} failure(s) from {memory.path}")


__all__ = ["errors_app", "memory_app", "register"]
