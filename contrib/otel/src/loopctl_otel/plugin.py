"""loopctl-otel's hook implementations (the ``otel`` entry point).

Cheap to import: the OpenTelemetry SDK is loaded when a run starts. A run's telemetry state (its
:class:`~loopctl_otel.recorder.Recorder`, the events that came before it, whether an export
failure was reported) is an :class:`OtelRun` in ``loop.stash`` under :data:`RUN`.

Nothing of a run lives in the module: ``on_event`` gets the loop too and finds the run in its
stash. The first events (``loop.start``, warnings) come before ``on_loop_start``, which is where
the config can be read: ``on_event`` puts the :class:`OtelRun` in the stash and keeps them in it
until then, and ``on_loop_start`` replays them into the recorder.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from loopctl import StashKey, hookimpl
from loopctl_otel.events import EXPORT_FAILED, EXPORTING, WARNING

if TYPE_CHECKING:
    from loopctl import Event, Loop, LoopOutcome
    from loopctl_otel.recorder import Recorder

NAME = "otel"
#: Events kept between ``loop.start`` and ``on_loop_start`` (normally a handful).
_EARLY_LIMIT = 200


class OtelRun:
    """One run's telemetry state, in ``loop.stash[RUN]``."""

    __slots__ = ("early", "recorder", "reported")

    def __init__(self) -> None:
        #: Events taken before the recorder existed, replayed into it (then None).
        self.early: list[Event] | None = []
        #: Recording this run (None: telemetry is off, or not started yet).
        self.recorder: Recorder | None = None
        #: ``otel.export_failed`` was written (it is written once per run).
        self.reported = False


#: This run's :class:`OtelRun`.
RUN = StashKey[OtelRun]()


def current_recorder(loop: Loop) -> Recorder | None:
    """The recorder of ``loop``'s run (None when telemetry is off): for tests."""
    run = loop.stash.get(RUN)
    return run.recorder if run is not None else None


@hookimpl
def register_config() -> dict[str, type]:
    from loopctl_otel.config import OtelConfig

    return {NAME: OtelConfig}


@hookimpl
def register_run_options() -> list[Any]:
    from loopctl import RunOption

    return [
        RunOption(
            "--otel-exporter",
            f"plugins.{NAME}.exporter",
            help="Where loopctl-otel sends traces and metrics (default: otlp).",
            metavar="KIND",
            choices=("otlp", "console", "none"),
        ),
        RunOption(
            "--otel-endpoint",
            f"plugins.{NAME}.endpoint",
            help="The OTLP/HTTP base URL (default: $OTEL_EXPORTER_OTLP_ENDPOINT, else "
            "http://localhost:4318).",
            metavar="URL",
        ),
    ]


@hookimpl
def register_event_schemas() -> dict[str, dict[str, Any]]:
    from loopctl_otel.events import event_schemas

    return event_schemas()


@hookimpl(tryfirst=True)
def on_loop_start(loop: Loop) -> None:
    run = loop.stash.setdefault(RUN, OtelRun())  # on_event made it when events came first
    early, run.early = run.early or [], None
    from loopctl_otel import __version__, pipeline
    from loopctl_otel.recorder import Recorder

    config = loop.plugin_config(NAME)
    try:
        built = pipeline.build(config, version=__version__)
    except Exception as exc:  # noqa: BLE001 - telemetry must never stop the loop
        loop.emit(WARNING, message=f"OpenTelemetry is off for this run: {_words(exc)}")
        return
    if built is None:
        return
    for warning in built.warnings:
        loop.emit(WARNING, message=warning)
    if not built.kinds:
        return
    try:
        recorder = Recorder(built, config, loop)
        for event in early:
            recorder.handle(event)
    except Exception as exc:  # noqa: BLE001 - telemetry must never stop the loop
        built.close()
        loop.emit(WARNING, message=f"OpenTelemetry is off for this run: {_words(exc)}")
        return
    run.recorder = recorder
    traces, metrics = built.destinations.get("traces"), built.destinations.get("metrics")
    trace_id = recorder.trace_id
    parts = []
    if traces:
        parts.append(f"traces → {traces}" + (f" (trace {trace_id})" if trace_id else ""))
    if metrics:
        parts.append(f"metrics → {metrics}")
    loop.emit(
        EXPORTING,
        summary=", ".join(parts),
        traces=traces,
        metrics=metrics,
        trace_id=trace_id,
    )


@hookimpl
def on_event(event: Event, loop: Loop) -> None:
    run = loop.stash.get(RUN)
    if run is None:  # an event before on_loop_start: keep it for the recorder
        run = loop.stash[RUN] = OtelRun()
    recorder = run.recorder
    if recorder is not None:
        try:
            recorder.handle(event)
        except Exception as exc:  # noqa: BLE001 - one warning, not a plugin.error per event
            run.recorder = None
            _give_up(recorder, exc)
            return
        _report_failures(run, recorder, emit=None)
    elif run.early is not None and len(run.early) < _EARLY_LIMIT:
        run.early.append(event)


@hookimpl(trylast=True)
def on_loop_end(loop: Loop, outcome: LoopOutcome) -> None:
    """Last of all plugins, so their final events are in the trace: end every span, flush
    (bounded by ``timeout_s``), and report an export failure once."""
    run = loop.stash.get(RUN)
    if run is None:
        return
    run.early = None  # events after the end (none but this plugin's own) are not kept
    recorder, run.recorder = run.recorder, None
    if recorder is None:
        return
    try:
        recorder.finish(outcome)
    finally:
        recorder.pipeline.close()
        _report_failures(run, recorder, emit=loop.emit)


def _words(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


def _give_up(recorder: Recorder, exc: Exception) -> None:
    """A bug in the recorder: end what it has, say so once, and record nothing more."""
    try:
        recorder.finish(None)
    except Exception:  # noqa: BLE001 - already giving up
        pass
    recorder.pipeline.close()
    if recorder.loop is not None:
        recorder.loop.emit(
            WARNING,
            message=f"telemetry is off for the rest of this run after an error: {_words(exc)}",
        )


def _report_failures(run: OtelRun, recorder: Recorder, emit: Any) -> None:
    """Write ``otel.export_failed`` the first time an export failed in this run."""
    if run.reported or recorder.pipeline.failures.count == 0:
        return
    if emit is None:
        loop = recorder.loop
        if loop is None:
            return
        emit = loop.emit
    run.reported = True
    failed = recorder.pipeline.failures.snapshot()
    destinations = recorder.pipeline.destinations
    where: list[str] = []
    for signal in failed:  # the base URL once, not /v1/traces and /v1/metrics apart
        place = destinations.get(signal, signal)
        place = place[: -len(f"/v1/{signal}")] if place.endswith(f"/v1/{signal}") else place
        if place not in where:
            where.append(place)
    first = next(iter(failed.values()), "the exporter reported a failure")
    emit(
        EXPORT_FAILED,
        signals=" and ".join(sorted(failed)),
        destination=", ".join(where),
        error=first,
    )
