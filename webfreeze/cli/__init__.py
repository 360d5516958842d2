"""The ``webfreeze`` command line.

Every error a user can cause is printed as one line on stderr with a non-zero exit status:
1 for a problem with the data or the environment, 2 for a bad command line.
"""

from __future__ import annotations

import os
import signal
import sqlite3
import sys
import threading

import click

from webfreeze import __version__
from webfreeze.cli.archive import archive_group
from webfreeze.cli.bench import bench_group, demo, tasks_validate
from webfreeze.checks.drift import drift_command
from webfreeze.cli.bundle import bundle_group
from webfreeze.cli.cassette import cassette_group
from webfreeze.cli.context import context_group
from webfreeze.cli.eval import eval_group, tasks_group
from webfreeze.cli.options import EXIT_USAGE, Terminated, fail
from webfreeze.cli.mcp import export_har_command, serve_command
from webfreeze.cli.personas import personas_group
from webfreeze.cli.record import record_group
from webfreeze.cli.replay import replay_group
from webfreeze.cli.sites import sites_group
from webfreeze.cli.study import study_group
from webfreeze.common.errors import WebfreezeError


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, "-V", "--version", prog_name="webfreeze")
def cli() -> None:
    """Record websites into content-addressed archives, replay them offline and deterministically,
    and benchmark web agents against the replay."""


# one module per command group (webfreeze/cli/<group>.py); `tasks validate` runs the suite like `bench run`
for _group in (archive_group, record_group, sites_group, replay_group, eval_group, tasks_group, bench_group, demo,
               cassette_group, personas_group, bundle_group, study_group, context_group, drift_command,
               serve_command):
    cli.add_command(_group)
tasks_group.add_command(tasks_validate)
eval_group.add_command(export_har_command)


# ============================================================================== entry point
def _on_sigterm(signum, frame) -> None:
    signal.signal(signal.SIGTERM, signal.SIG_DFL)  # a second SIGTERM during the clean-up ends the process
    raise Terminated()


def main(argv: list[str] | None = None) -> None:
    """Run the CLI with one-line errors and meaningful exit codes."""
    installed = threading.current_thread() is threading.main_thread()
    if installed:
        previous = signal.getsignal(signal.SIGTERM)
        signal.signal(signal.SIGTERM, _on_sigterm)
    try:
        _run(argv)
    except Terminated:  # one that came while an error was being reported
        fail("terminated", 128 + signal.SIGTERM)
    finally:
        if installed:
            signal.signal(signal.SIGTERM, signal.SIG_DFL if previous is None else previous)


def _run(argv: list[str] | None) -> None:
    try:
        cli.main(args=argv, prog_name="webfreeze", standalone_mode=False)
    except click.exceptions.NoArgsIsHelpError as exc:  # a group named alone: its help, as `--help` shows it
        click.echo(exc.ctx.get_help() if exc.ctx else exc.format_message(), err=True)
        sys.exit(EXIT_USAGE)
    except click.UsageError as exc:
        hint = f" (see '{exc.ctx.command_path} --help')" if exc.ctx else ""
        fail(f"{exc.format_message()}{hint}", EXIT_USAGE)
    except click.ClickException as exc:
        fail(exc.format_message())
    except click.exceptions.Abort:
        fail("interrupted", 130)  # Ctrl-C (click turns KeyboardInterrupt into Abort)
    except WebfreezeError as exc:  # every error a user can cause (common/errors.py's family): one line
        fail(str(exc))
    except KeyboardInterrupt:
        fail("interrupted", 130)
    except Terminated:
        fail("terminated", 128 + signal.SIGTERM)
    except BrokenPipeError:
        sys.stderr.close()  # output piped into `head`: not an error
        sys.exit(0)
    except OSError as exc:
        fail(f"{str(exc.filename) + ': ' if exc.filename else ''}{exc.strerror or exc}")
    except sqlite3.Error as exc:  # disk full, a locked or damaged file
        fail(f"archive storage error: {exc}")
    except Exception as exc:  # a bug: still one line, with a way to see more
        if os.environ.get("WEBFREEZE_DEBUG"):
            raise
        fail(f"internal error: {type(exc).__name__}: {exc} (set WEBFREEZE_DEBUG=1 for a traceback)", 70)
    sys.exit(0)


if __name__ == "__main__":
    main()
