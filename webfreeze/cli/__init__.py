"""The ``webfreeze`` command line.

Every error a user can cause is printed as one line on stderr with a non-zero exit status:
1 for a problem with the data or the environment, 2 for a bad command line.
"""

from __future__ import annotations

import importlib
import os
import signal
import sqlite3
import sys
import threading

import click

from webfreeze import __version__
from webfreeze.cli.options import EXIT_USAGE, Terminated, fail, missing_extra
from webfreeze.common.errors import WebfreezeError

# Each command (a group or a single command) by name -> (module, attribute, the optional extra it
# needs beyond the base install, or None). A module is imported only when its command is invoked (or
# listed by `webfreeze --help`): `webfreeze archive ls` does not load the runner, Playwright or Ray.
# Every command module imports with the base install alone (its `--help` works there); what an extra
# brings is imported where the command runs, and a missing one is one line naming the extra
# (options.missing_extra). No command module imports another's: what two share is outside cli/.
COMMANDS = {
    "archive": ("webfreeze.cli.archive", "archive_group", None),
    "bench": ("webfreeze.cli.bench", "bench_group", "sim"),
    "browsergym": ("webfreeze.cli.browsergym", "browsergym_group", None),
    "bundle": ("webfreeze.cli.bundle", "bundle_group", "sim"),
    "cassette": ("webfreeze.cli.cassette", "cassette_group", "llm"),
    "context": ("webfreeze.cli.context", "context_group", "sim"),
    "demo": ("webfreeze.cli.demo", "demo", "demo"),
    "drift": ("webfreeze.cli.drift", "drift_command", "sim"),
    "eval": ("webfreeze.cli.eval", "eval_group", None),
    "mcp": ("webfreeze.cli.mcp", "serve_command", "mcp"),
    "personas": ("webfreeze.cli.personas", "personas_group", "agents"),
    "record": ("webfreeze.cli.record", "record_group", "record"),
    "replay": ("webfreeze.cli.replay", "replay_group", "replay"),
    "sites": ("webfreeze.cli.sites", "sites_group", "sites"),
    "study": ("webfreeze.cli.study", "study_group", "sim"),
    "tasks": ("webfreeze.cli.tasks", "tasks_group", "sim"),
}


# What `webfreeze --help` says of each command: its listing is read from here, so that it imports
# no command module (a second, not a tenth of one); each command's own `--help` is its docstring.
SUMMARIES = {
    "archive": "Create, inspect, verify, convert and maintain archives.",
    "bench": "Run agents on task suites over an archive, and compare runs.",
    "browsergym": "Set-up for BrowserGym and AgentLab agents on frozen tasks.",
    "bundle": "One-file benchmark bundles: pack, verify and re-run offline.",
    "cassette": "Inspect, verify, merge, redact and serve LLM cassettes.",
    "context": "Filler pools for long-context runs (bench run --context).",
    "demo": "The whole loop on the shipped demo suite and archive.",
    "drift": "Measure how a site drifted between two archives of it.",
    "eval": "Score runs against their tasks' ground truth; reports, HAR.",
    "mcp": "Serve a suite's tasks to an MCP client (Playwright MCP's tools).",
    "personas": "Synthetic users with web histories, and personalised tasks.",
    "record": "Record live traffic into an archive: crawls, sessions, a proxy.",
    "replay": "Replay an archive offline, and check it against its captures.",
    "sites": "Simulated live sites, deterministic for a seed.",
    "study": "Run a grid of agent configurations and aggregate the runs.",
    "tasks": "Task suites: validate them and count their tasks.",
}


class LazyGroup(click.Group):
    """The main group: its commands are :data:`COMMANDS`, imported on first use; its listing is
    :data:`SUMMARIES`."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name not in COMMANDS:
            return None
        module, attribute, _extra = COMMANDS[name]
        return getattr(importlib.import_module(module), attribute)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = [(name, SUMMARIES[name]) for name in self.list_commands(ctx)]
        with formatter.section("Commands"):
            formatter.write_dl(rows)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, "-V", "--version", prog_name="webfreeze")
def cli() -> None:
    """Record websites into content-addressed archives, replay them offline and deterministically,
    and benchmark web agents against the replay."""


# ============================================================================== entry point
def _on_sigterm(signum, frame) -> None:
    signal.signal(signal.SIGTERM, signal.SIG_DFL)  # a second SIGTERM during the clean-up ends the process
    raise Terminated()


def node_compile_cache() -> None:
    """Let Node keep the code it compiles between runs (Playwright's driver, which every browser
    command starts, is a Node program: its start takes ~15% less CPU with the cache): the
    environment's ``NODE_COMPILE_CACHE``, set to ``<cache>/node-compile-cache`` (``$WEBFREEZE_CACHE``,
    else ~/.cache/webfreeze) unless the user set it or ``NODE_DISABLE_COMPILE_CACHE``. Node
    checks each entry against its source and skips a folder it cannot write."""
    if "NODE_COMPILE_CACHE" in os.environ or "NODE_DISABLE_COMPILE_CACHE" in os.environ:
        return
    from webfreeze.samples import cache_dir

    os.environ["NODE_COMPILE_CACHE"] = str(cache_dir() / "node-compile-cache")


def main(argv: list[str] | None = None) -> None:
    """Run the CLI with one-line errors and meaningful exit codes."""
    node_compile_cache()
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
    except ModuleNotFoundError as exc:  # an optional extra this command needs is not installed
        missing = missing_extra(exc, _command_extra(argv))
        if missing is None:
            _internal_error(exc)
        fail(str(missing))
    except Exception as exc:  # a bug: still one line, with a way to see more
        _internal_error(exc)
    sys.exit(0)


def _internal_error(exc: Exception) -> None:
    if os.environ.get("WEBFREEZE_DEBUG"):
        raise exc
    fail(f"internal error: {type(exc).__name__}: {exc} (set WEBFREEZE_DEBUG=1 for a traceback)", 70)


def _command_extra(argv: list[str] | None) -> str | None:
    """The extra of the command the command line names (its first argument: the main group takes
    no option before it but --help and --version)."""
    args = sys.argv[1:] if argv is None else argv
    return COMMANDS[args[0]][2] if args and args[0] in COMMANDS else None


if __name__ == "__main__":
    main()
