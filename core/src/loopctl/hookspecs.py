"""Hook specifications: every point where a plugin can take part in a loop.

A plugin is a module or object with functions named after these hooks and marked with
``@loopctl.hookimpl``. It takes only the arguments it names, in any order. Plugins are installed
as distributions with an entry point in the ``loopctl.plugins`` group (see :mod:`loopctl.pluginhost`).

Two rules hold for every hook:

* **Isolation.** An implementation that raises is reported (on stderr and as a ``plugin.error``
  event naming the plugin and the hook) and treated as if it returned ``None``; the other
  implementations and the loop go on. With ``plugins.strict = true`` (for plugin authors) the
  exception propagates and ends the run instead.
* **Order.** Implementations run in reverse registration order (pluggy's rule): plugins loaded
  later run first, loopctl's own built-ins run last. Use ``tryfirst=True``/``trylast=True`` on the
  marker to move an implementation; results of collect-all hooks come back in that call order.

The lifecycle of one run, in order:

    add_hookspecs → register_config, register_agents, register_run_options
    → resolve_original_goal → on_loop_start
    → (a new run: tests first) → on_failure | on_success (iteration 0, ending tests_first)
    ┌→ before_iteration → compose_prompt → (agent runs: on_agent_message …)
    │  → (tests run) → on_failure | on_success → after_iteration → decide
    └─ restart? → on_restart ──┘
    on_loop_end

Every ``before_iteration`` is closed by exactly one ``after_iteration``, whose record's
``ending`` says why the iteration ended (:class:`~loopctl.model.IterationEnd`): the tests ran,
the agent failed before them, a rate limit was waited out (the iteration is tried again), or
the run was interrupted. ``on_failure``/``on_success`` run before it whenever the iteration
got as far as judging its result.

Before the first agent turn of a new run (not on resume, not after a restart), loopctl runs
the test command once (``test_first``) and calls ``on_failure`` or ``on_success`` with its
result and a record of iteration 0 whose ``ending`` is ``tests_first``: no agent ran, and no
``before_iteration``/``after_iteration`` surrounds it (the engine decides: a pass ends the run
``complete`` unless a ``CompletionVeto`` or a completion signal asks for the agent).

``on_event`` sees every event written to ``events.jsonl`` along the way.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pluggy

from loopctl.markers import PROJECT_NAME, hookimpl, hookspec

# The types below appear in annotations only: pluggy never evaluates them, and importing them
# would make every `loopctl plugins list` (which loads this module) pay for the loop's modules.
if TYPE_CHECKING:
    from loopctl.agents.base import AgentAdapter
    from loopctl.clicommand import CliCommand
    from loopctl.loop import Loop, LoopOutcome, Restart
    from loopctl.model import (
        AgentMessage,
        CompletionVeto,
        Decision,
        Event,
        IterationRecord,
        NotAgentsFault,
        PromptSection,
        RunOption,
        TestRun,
    )


# --- registration hooks (called once, when the plugin host starts) ------------------------------


@hookspec(historic=True)
def add_hookspecs(pluginmanager: pluggy.PluginManager) -> None:
    """Add a plugin's own hook specifications, so other plugins can implement them.

    Called once for every plugin as it is registered (historic: plugins registered later are
    still called). Call ``pluginmanager.add_hookspecs(module_or_class)``; the failure-classifier
    plugin adds ``classify_failure`` this way. Call the new hooks through ``loop.hook.NAME(...)``.

    :param pluginmanager: the :class:`pluggy.PluginManager` of this run.

    Return value: ignored. If it raises, the plugin's hooks are not added and the error is reported.

    .. versionadded:: 0.1
    """


@hookspec
def register_config() -> dict[str, type] | None:
    """Declare the plugin's config section and its typed class.

    Return ``{"plugin-name": ConfigClass}``, where ``ConfigClass`` is an attrs class whose fields
    all have defaults. The section ``[tool.loopctl.plugins.plugin-name]`` (or
    ``[plugins.plugin-name]`` in ``loopctl.toml``) is structured into it with cattrs; unknown keys
    and wrong types are errors naming the file and key path. Read it with
    ``loop.plugin_config("plugin-name")``.

    Results: collected from every plugin; a name declared twice is an error naming both plugins.

    .. versionadded:: 0.1
    """


@hookspec
def register_agents() -> list[type[AgentAdapter]] | None:
    """Add agent adapters, selectable with ``--agent NAME`` and listed by ``loopctl agents list``.

    Return a list of :class:`loopctl.agents.base.AgentAdapter` subclasses; each has a unique
    ``name``. Results: collected from every plugin; a name registered twice is an error naming
    both. loopctl's own adapters (``command``, ``scripted`` …) come from its built-in plugin.

    .. versionadded:: 0.1
    """


@hookspec
def register_commands(cli: Any) -> None:
    """Add subcommands to the ``loopctl`` command.

    :param cli: the root :class:`typer.Typer` app. Add a sub-app with
        ``cli.add_typer(my_app, name="mything")`` or a command with ``@cli.command("name")``.

    Called only when a command that is not built in is requested or ``--help`` is shown, so a
    plugin's CLI code costs nothing on other commands. Return value: ignored.

    .. versionadded:: 0.1
    """


@hookspec
def register_cli_commands() -> list[CliCommand] | None:
    """Add subcommands that start fast: described, not built with typer.

    Return a list of :class:`loopctl.CliCommand`. loopctl runs the plain form of such a command
    (its known options and arguments) without importing typer, about 40 ms sooner than a
    ``register_commands`` command; ``--help`` and mistakes go to a typer command made from the
    same description. Keep the module that returns them cheap to import: the command's function
    is imported only when it runs.

    Results: collected from every enabled plugin; a command whose path another plugin (or a
    ``register_commands`` command) also takes replaces it in registration order, and a command
    named like a built-in one (``run``, ``status`` …) is ignored. Called when a command that is
    not built in is requested or ``--help`` is shown.

    .. versionadded:: 0.2
    """


@hookspec
def register_run_options() -> list[RunOption] | None:
    """Add options to ``loopctl run`` and ``loopctl resume`` that set a plugin's config keys.

    Return a list of :class:`~loopctl.model.RunOption`: ``RunOption("--failure-mode",
    "plugins.failure-classifier.force_mode", help=..., choices=[...])`` makes
    ``loopctl run … --failure-mode dependency_issue`` a command-line override of that key
    (it shows in ``loopctl config show`` as coming from the command line), validated against
    ``choices`` when given and then by the plugin's config class.

    Results: collected from every enabled plugin; a flag claimed twice is an error naming both
    plugins. The options are listed at the end of ``loopctl run --help``.

    .. versionadded:: 0.1
    """


@hookspec
def register_event_schemas() -> dict[str, dict[str, Any]] | None:
    """Declare the events the plugin writes, for the published schema of ``events.jsonl``.

    Return ``{"event.type": loopctl.events.event("description", {required fields},
    {optional fields})}`` with JSON Schema fragments for the fields. ``loopctl events schema``
    prints the combined schema; tests can validate every line of a run against it.

    Results: collected from every enabled plugin; a type declared twice is an error naming both.

    .. versionadded:: 0.1
    """


# --- the loop lifecycle ------------------------------------------------------------------------


@hookspec(firstresult=True)
def resolve_original_goal(loop: Loop, stored: str) -> str | None:
    """Say which original goal the run carries, before ``on_loop_start``.

    :param stored: the original goal as the state files hold it: what the user gave on a fresh
        run; on ``loopctl resume``, what ``loop-state.md`` says now (which may have been edited
        on disk, or come from an older tool that kept no original goal).

    Return ``None`` to keep ``stored``, or the text the run must carry instead (a guard that
    sealed the goal when the run began puts it back). The first non-``None`` result wins; the
    change is recorded as a ``loop.original_goal_restored`` event naming the plugin. This is
    the only way the original goal ever changes.

    .. versionadded:: 0.2
    """


@hookspec
def on_loop_start(loop: Loop) -> None:
    """The loop is about to run its first iteration (also after ``loopctl resume``).

    :param loop: the running :class:`loopctl.Loop`; ``loop.resumed`` tells a fresh start
        from a resume. Its state files exist and the original goal is fixed.

    Return value: ignored. Called for every plugin, in hook order.

    .. versionadded:: 0.1
    """


@hookspec
def before_iteration(loop: Loop) -> None:
    """An iteration is starting; ``loop.iteration`` is its number (1-based, across restarts).

    Use it to snapshot what the agent may change (the context monitor records the working tree
    here). Runs before ``compose_prompt``. Return value: ignored.

    .. versionadded:: 0.1
    """


@hookspec
def compose_prompt(loop: Loop) -> list[PromptSection] | PromptSection | None:
    """Contribute sections to this iteration's agent prompt.

    Return a :class:`~loopctl.model.PromptSection`, a list of them, or ``None``. The engine
    gathers the sections of every plugin (its own goal and test-result sections included),
    orders them by descending ``priority``, and fits them into ``prompt.budget_chars`` by
    trimming the lowest-priority unprotected sections first, at line boundaries, with a notice.
    A section without a ``source`` is attributed to the plugin that returned it.
    Plugins never see or edit each other's text; a plugin that must (to deduplicate, say) can
    implement this hook as a ``wrapper=True`` implementation and rewrite the collected list.

    Results: collected from every plugin (all are used). Raising drops that plugin's sections.

    .. versionadded:: 0.1
    """


@hookspec(firstresult=True)
def on_agent_message(loop: Loop, message: AgentMessage) -> Decision | None:
    """A parsed message arrived from the running agent (called while the agent runs).

    :param message: an :class:`~loopctl.model.AgentMessage`: text, a tool call or its result,
        per-request token usage (``message.usage``), CLI housekeeping, or the final result.

    Return ``None`` to let the turn go on, or a :class:`~loopctl.model.Decision` to end the turn
    now, at this message boundary: ``Decision.restart(reason)`` ends the turn and restarts the
    session after the iteration; ``Decision.stop(reason)`` ends the turn and then the loop. The
    tests still run, so the iteration closes as usual.
    The first non-``None`` result wins and the remaining implementations are not called for that
    message. Keep it fast: it runs on every message (the context monitor's takes microseconds).

    .. versionadded:: 0.1
    """


@hookspec
def on_failure(
    loop: Loop, record: IterationRecord, test_run: TestRun | None
) -> NotAgentsFault | None:
    """The iteration's tests failed, or the agent's turn failed. Runs before ``after_iteration``;
    also for the tests run before the first turn (``record.iteration`` 0, ``record.ending``
    ``tests_first``, no ``after_iteration``).

    :param record: this iteration's :class:`~loopctl.model.IterationRecord`, complete but not yet
        written; ``record.ending`` says whether the tests ran.
    :param test_run: the iteration's own :class:`~loopctl.model.TestRun` (None when the agent's
        failure ended the iteration before the tests). It is the same object for every plugin:
        a re-run made with ``loop.run_tests`` is returned to its caller and never replaces it.

    Use it to diagnose: re-run tests, classify, write reports, annotate the record
    (``loop.annotate``). Return a :class:`~loopctl.model.NotAgentsFault` when the failure is not
    the agent's (a flaky test, a broken environment): stuck detection then skips it. To change
    what happens next, return a decision from ``after_iteration``.

    .. versionadded:: 0.1
    .. versionchanged:: 0.2 ``test_run`` argument; the ``NotAgentsFault`` result.
    """


@hookspec
def on_success(loop: Loop, record: IterationRecord, test_run: TestRun) -> CompletionVeto | None:
    """The iteration's tests passed (and the agent's turn did not fail). Runs before
    ``after_iteration``; also for the tests run before the first turn (``record.iteration`` 0,
    ``record.ending`` ``tests_first``, no ``after_iteration``): a veto then has the agent work.

    :param record: this iteration's :class:`~loopctl.model.IterationRecord`, complete but not yet
        written.
    :param test_run: the iteration's own passing :class:`~loopctl.model.TestRun`.

    Return a :class:`~loopctl.model.CompletionVeto` when the pass must not end the run (a flaky
    pass, say): the loop goes on and a ``loop.completion_vetoed`` event names the plugin.

    .. versionadded:: 0.1
    .. versionchanged:: 0.2 ``test_run`` argument; the ``CompletionVeto`` result.
    """


@hookspec
def after_iteration(
    loop: Loop, record: IterationRecord, test_run: TestRun | None
) -> Decision | None:
    """The iteration ended: decide what happens next (continue, restart the session, or stop).

    Called once for every ``before_iteration``, however the iteration ended:
    ``record.ending`` is an :class:`~loopctl.model.IterationEnd` value. When it is
    ``rate_limited`` or ``interrupted`` the iteration is not recorded and the result is ignored
    (the iteration runs again, or the run is ending).

    :param record: this iteration's :class:`~loopctl.model.IterationRecord`.
    :param test_run: the iteration's own :class:`~loopctl.model.TestRun`, None when the tests
        did not run.

    Return ``None`` (no opinion) or a :class:`~loopctl.model.Decision`. Every implementation is
    called; the strongest decision wins (stop > restart > continue), and among equals the first
    in hook order. ``Decision.complete()`` ends the run as a success. The engine's own decision
    (tests passed → complete; limits; stuck detection) is weighed with the plugins'. A
    decision's ``remaining_iterations`` lowers the budget whichever decision wins.

    .. versionadded:: 0.1
    .. versionchanged:: 0.2 ``test_run`` argument; called for every iteration.
    """


@hookspec
def on_restart(loop: Loop, restart: Restart) -> None:
    """The session was restarted: artifacts are archived and the next iteration gets a fresh
    agent session.

    :param restart: a :class:`loopctl.Restart` with ``number`` (1-based), ``reason``,
        ``message`` and ``archive_dir`` (the ``restart-N/`` directory).

    Use it to prepare a briefing for the fresh session (inject it through ``compose_prompt``).
    Return value: ignored.

    .. versionadded:: 0.1
    """


@hookspec
def on_loop_end(loop: Loop, outcome: LoopOutcome) -> None:
    """The loop ended, however it ended (complete, a limit, an error, Ctrl-C).

    :param outcome: a :class:`loopctl.LoopOutcome` with ``status``, ``reason``,
        ``message`` and ``exit_code``. The run report is written after this hook, so sections a
        plugin adds with ``loop.add_report_section`` appear in it. Return value: ignored.

    .. versionadded:: 0.1
    """


@hookspec
def on_event(event: Event, loop: Loop) -> None:
    """An event was recorded in ``events.jsonl``: the hook for telemetry sinks.

    :param event: the :class:`~loopctl.model.Event` (``type``, ``ts``, ``iteration``, ``data``).
    :param loop: the run that recorded it (its ``stash`` holds the plugin's state for it).

    Called synchronously for every event, so queue slow exports. Return value: ignored.
    Events a plugin emits from inside this hook are recorded but not passed to ``on_event``
    again (no feedback loops).

    .. versionadded:: 0.1
    .. versionchanged:: 0.2 the ``loop`` argument.
    """


def hook_names() -> list[str]:
    """The names of every hook specified here, in lifecycle order (used by docs and tests)."""
    return [name for name, value in globals().items() if hasattr(value, f"{PROJECT_NAME}_spec")]


__all__ = ["PROJECT_NAME", "hook_names", "hookimpl", "hookspec"]
