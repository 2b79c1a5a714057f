"""loopctl-otel's hook implementations (the ``otel`` entry point).

Cheap to import: the OpenTelemetry SDK is loaded when a run starts. One loop runs at a time in a
process, so the recorder of the current run is kept in this module. ``on_event`` has no loop
argument and the first events (``loop.start``, warnings) come before ``on_loop_start``, which
is where the config can be read: they are kept until then and replayed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from loopctl.hookspecs import hookimpl

if TYPE_CHECKING:
    from loopctl.engine import Loop, LoopOutcome
    from loopctl.model import Event
    from loopctl_otel.recorder import Recorder

NAME = "otel"
#: Events kept between ``loop.start`` and ``on_loop_start`` (normally a handful).
_EARLY_LIMIT = 200

_recorder: Recorder | None = None
_early: list[Event] | None = None
_reported = False


def current_recorder() -> Recorder | None:
    """The recorder of the run in progress (None between runs): for tests."""
    return _recorder


@hookimpl
def register_config() -> dict[str, type]:
    from loopctl_otel.config import OtelConfig

    return {NAME: OtelConfig}


@hookimpl
def register_run_options() -> list[Any]:
    from loopctl.model import RunOption

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
    global _recorder, _early, _reported
    early, _early = _early or [], None
    _reported = False
    _recorder = None
    from loopctl_otel import __version__, pipeline
    from loopctl_otel.recorder import Recorder

    config = loop.plugin_config(NAME)
    try:
        built = pipeline.build(config, version=__version__)
    except Exception as exc:  # noqa: BLE001 - telemetry must never stop the loop
        loop.emit("otel.warning", message=f"OpenTelemetry is off for this run: {_words(exc)}")
        return
    if built is None:
        return
    for warning in built.warnings:
        loop.emit("otel.warning", message=warning)
    if not built.kinds:
        return
    try:
        recorder = Recorder(built, config, loop)
        for event in early:
            recorder.handle(event)
    except Exception as exc:  # noqa: BLE001 - telemetry must never stop the loop
        built.close()
        loop.emit("otel.warning", message=f"OpenTelemetry is off for this run: {_words(exc)}")
        return
    _recorder = recorder
    traces, metrics = built.destinations.get("traces"), built.destinations.get("metrics")
    trace_id = recorder.trace_id
    parts = []
    if traces:
        parts.append(f"traces → {traces}" + (f" (trace {trace_id})" if trace_id else ""))
    if metrics:
        parts.append(f"metrics → {metrics}")
    loop.emit(
        "otel.exporting",
        summary=", ".join(parts),
        traces=traces,
        metrics=metrics,
        trace_id=trace_id,
    )


@hookimpl
def on_event(event: Event) -> None:
    global _early
    global _recorder
    recorder = _recorder
    if recorder is not None:
        try:
            recorder.handle(event)
        except Exception as exc:  # noqa: BLE001 - one warning, not a plugin.error per event
            _recorder = None
            _give_up(recorder, exc)
            return
        _report_failures(recorder, emit=None)
    elif event.type in ("loop.start", "loop.resume"):
        _early = [event]  # a new run: forget what an earlier one left
    elif _early is not None and len(_early) < _EARLY_LIMIT:
        _early.append(event)


@hookimpl(trylast=True)
def on_loop_end(loop: Loop, outcome: LoopOutcome) -> None:
    """Last of all plugins, so their final events are in the trace: end every span, flush
    (bounded by ``timeout_s``), and report an export failure once."""
    global _recorder, _early
    recorder, _recorder = _recorder, None
    _early = None
    if recorder is None:
        return
    try:
        recorder.finish(outcome)
    finally:
        recorder.pipeline.close()
        _report_failures(recorder, emit=loop.emit)


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
            "otel.warning",
            message=f"telemetry is off for the rest of this run after an error: {_words(exc)}",
        )


def _report_failures(recorder: Recorder, emit: Any) -> None:
    """Write ``otel.export_failed`` the first time an export failed in this run."""
    global _reported
    if _reported or recorder.pipeline.failures.count == 0:
        return
    if emit is None:
        loop = recorder.loop
        if loop is None:
            return
        emit = loop.emit
    _reported = True
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
        "otel.export_failed",
        signals=" and ".join(sorted(failed)),
        destination=", ".join(where),
        error=first,
    )
