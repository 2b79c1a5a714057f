"""Entry point of the ``loopctl`` command.

Dispatches the commands that must start fast (``--version``, ``plugins list``, ``status``, and
the plugins' :class:`~loopctl.CliCommand` s, in their plain forms) before anything heavy is
imported; every other command, and every other form
of those (``--help``, a mistake), goes to the typer app in :mod:`loopctl.cli.app`.
"""

from __future__ import annotations

import os
import sys


def main(argv: list[str] | None = None) -> int:
    """Run ``loopctl ARGS``; its exit code. A reader that goes away (``loopctl … | head``) ends
    the command quietly with exit code 1, as click does, not with a traceback. Without
    ``argv`` (the console script, ``python -m loopctl``) this is the command's own process,
    which a run splits in two (:mod:`loopctl.guard`)."""
    try:
        code = _main(sys.argv[1:] if argv is None else list(argv), own_process=argv is None)
        sys.stdout.flush()  # here, not at exit, where a closed pipe could only be reported
    except BrokenPipeError:
        _quiet_closed_pipe()
        return 1
    return code


def _quiet_closed_pipe() -> None:
    """Point stdout and stderr at the null device, so the interpreter's last flush of what is
    still buffered for the closed pipe does not print "Exception ignored …"."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    for stream in (sys.stdout, sys.stderr):
        try:
            os.dup2(devnull, stream.fileno())
        except (AttributeError, OSError, ValueError):  # not a real file (captured output)
            pass
    os.close(devnull)


def _main(args: list[str], *, own_process: bool = False) -> int:
    if args in (["--version"], ["-V"]):
        from loopctl._version import __version__

        print(f"loopctl {__version__}")
        return 0
    if args[:2] == ["plugins", "list"] and set(args[2:]) <= {"--json"}:
        from loopctl.cli.fast import plugins_list

        return plugins_list(json_output="--json" in args)
    if args[:1] == ["status"]:
        from loopctl.cli import fast

        options = fast.status_options(args[1:])
        if options is not None:
            fast.forgiving_streams()
            try:
                return fast.status(**options)
            except KeyboardInterrupt:
                fast.error("interrupted")
                return 130
    if args and not args[0].startswith("-"):
        from loopctl.cli import fast

        if args[0] not in fast.BUILTIN_COMMANDS:
            code = fast.plugin_command(args)  # a plugin's CliCommand, without typer
            if code is not None:
                return code
    if own_process:  # the command's own process, not a program calling main(): it may split
        from loopctl.guard import for_this_process

        for_this_process()
    from loopctl.cli.app import main as app_main

    try:
        return app_main(args)
    finally:
        if "loopctl.cli.fast" in sys.modules:
            sys.modules["loopctl.cli.fast"].take_host()  # not taken: not for a later main()


def _without_working_directory(path: list[str]) -> None:
    """Take the working directory off the front of ``path`` (``sys.path``), where ``python -m
    loopctl`` puts it (as ``python -P`` would not): a cloned repository's modules, and the
    ``*.dist-info`` entry points beside them, would be imported as loopctl's plugins."""
    if getattr(sys.flags, "safe_path", False):  # python -P: not put there (3.11+)
        return
    if path and path[0] in ("", os.getcwd()):
        del path[0]


if __name__ == "__main__":
    _without_working_directory(sys.path)
    sys.exit(main())
