"""``loopctl goal``: show the sealed original goal, check it against loop-state.md, list notes."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any, Optional

import typer

import loopctl

STATE_DIR_HELP = "The state directory (default: .loopctl in the working directory, or `state_dir`)."
StateDirOpt = Annotated[Optional[Path], typer.Option("--state-dir", help=STATE_DIR_HELP)]
TrustOpt = Annotated[
    bool,
    typer.Option(loopctl.UntrustedConfig.FLAG, help=loopctl.UntrustedConfig.FLAG_HELP),
]


def _state_dir(state_dir: Optional[Path], trust_config: bool) -> Path:
    """``--state-dir``, else the project's: one its config file puts outside the project is
    refused (exit 2) unless ``trust_config``."""
    if state_dir is not None:
        return state_dir if state_dir.is_absolute() else Path.cwd() / state_dir
    from loopctl import ConfigError, load_project

    try:
        return load_project(Path.cwd(), trust_config=trust_config).state_dir
    except ConfigError as exc:
        _warn(str(exc), kind="error")
        raise typer.Exit(2) from None


def _warn(message: str, *, kind: str = "warning") -> None:
    """``loopctl: warning: …`` on stderr; it may name a path: no terminal control."""
    for line in loopctl.sanitize(message).splitlines():
        print(f"loopctl: {kind}: {line}", file=sys.stderr)


def inspect_goal(state_dir: Path) -> dict[str, Any]:
    """The sealed record, loop-state.md's goals, and whether they agree (never raises)."""
    from loopctl import SavedRun, StateError
    from loopctl_goal_guard import record as rec
    from loopctl_goal_guard.guard import RUN_KEY

    read = rec.load(state_dir)
    problems = list(read.problems)
    state_original: str | None = None
    run_id: Any = None
    try:
        loop_state = SavedRun(state_dir).loop_state()
        state_original, run_id = loop_state.original_goal, loop_state.extra.get(RUN_KEY)
    except StateError as exc:
        problems.append(str(exc))
    sealed = read.sealed
    agrees = (
        sealed is not None
        and state_original is not None
        and state_original == sealed.text
        and run_id == sealed.run_id
    )
    if sealed is not None and state_original is not None and not agrees:
        if run_id != sealed.run_id:
            problems.append("the record belongs to another run than loop-state.md")
        else:
            problems.append(
                "loop-state.md's original_goal differs from the sealed goal; "
                "`loopctl resume` repairs it"
            )
    elif sealed is None and not problems:
        problems.append("no goal-guard record (the loop ran without goal-guard)")
    return {
        "state_dir": str(state_dir),
        "sealed": None
        if sealed is None
        else {
            "text": sealed.text,
            "sha256": sealed.sha256,
            "chars": len(sealed.text),
            "run_id": sealed.run_id,
            "sealed_at": sealed.sealed_at,
            "sealed_from": sealed.sealed_from,
        },
        "loop_state_original_goal": state_original,
        "agrees": agrees,
        "repaired_files": list(read.repaired_files),
        "problems": problems,
    }


def register(cli: Any) -> None:
    goal_app = typer.Typer(
        help="goal-guard: the sealed original goal and the notes kept beside it.",
        no_args_is_help=True,
    )

    @goal_app.command(
        "show", epilog="\b\nExamples:\n  loopctl goal show\n  loopctl goal show --json"
    )
    def show(
        state_dir: StateDirOpt = None,
        json_output: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
        trust_config: TrustOpt = False,
    ) -> None:
        """Print the original goal as sealed (without terminal control characters), and whether
        loop-state.md agrees."""
        data = inspect_goal(_state_dir(state_dir, trust_config))
        if json_output:
            print(loopctl.sanitize(json.dumps(data, indent=2, ensure_ascii=False)))
            return
        sealed = data["sealed"]
        if sealed is None:
            print(loopctl.sanitize(f"no sealed goal in {data['state_dir']}"))
        else:
            print(
                loopctl.sanitize(
                    f"sealed from {sealed['sealed_from']}: {sealed['chars']} chars, "
                    f"sha256 {sealed['sha256']}"
                )
            )
            print(f"loop-state.md agrees: {'yes' if data['agrees'] else 'NO'}")
            print("---")
            text = loopctl.sanitize(sealed["text"])
            sys.stdout.write(text + ("" if text.endswith("\n") else "\n"))
        for problem in data["problems"]:
            _warn(problem)

    @goal_app.command("check", epilog="\b\nExample:\n  loopctl goal check --state-dir .loopctl")
    def check(state_dir: StateDirOpt = None, trust_config: TrustOpt = False) -> None:
        """Exit 0 when loop-state.md's original goal matches the sealed one, 1 otherwise."""
        data = inspect_goal(_state_dir(state_dir, trust_config))
        if data["agrees"]:
            print(f"ok: the original goal matches the sealed record ({data['sealed']['sha256']})")
            return
        for problem in data["problems"] or ["the original goal does not match"]:
            _warn(problem, kind="goal")
        raise typer.Exit(1)

    @goal_app.command("notes", epilog="\b\nExample:\n  loopctl goal notes --json")
    def notes(
        state_dir: StateDirOpt = None,
        json_output: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
        trust_config: TrustOpt = False,
    ) -> None:
        """List the notes kept beside the goal, most important first."""
        from loopctl_goal_guard import record as rec
        from loopctl_goal_guard.notes import NoteBook, NoteJournal

        book = NoteBook(max_notes=10**9)
        guard = rec.guard_dir(_state_dir(state_dir, trust_config))
        NoteJournal(guard / rec.NOTES_FILE).read_into(book)
        entries = list(book.keep_order())
        if json_output:
            text = json.dumps([e.to_json() for e in entries], indent=2, ensure_ascii=False)
            print(loopctl.sanitize(loopctl.redact(text)))
            return
        if not entries:
            print("no notes")
        for entry in entries:  # a note may quote test output: no secret, no terminal control
            print(loopctl.sanitize(loopctl.redact(f"[p{entry.priority}] {entry.render()}")))

    cli.add_typer(goal_app, name="goal")
