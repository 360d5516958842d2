"""webfreeze: record, replay and benchmark web agents on frozen websites.

The library's front door: the names a researcher needs, imported on first use.

- archives: :func:`open_archive`, :func:`import_warc` (WARC, ARC, WACZ, HAR into an archive),
  :class:`Archive`, the typed records it yields (:class:`ExchangeRecord`, :class:`PageRecord`,
  :class:`DocumentRecord`) and the :class:`Exchange` it stores
- replay: :class:`Replay` (the answer to a request, no sockets), :class:`ReplayServer` (HTTP over it)
- the environment: :class:`WebEnv`, :class:`EnvConfig` (Gymnasium ``Env``)
- agents: :class:`Agent`, :class:`TaskView`, :func:`make_agent`
- runs: :func:`run` (what ``webfreeze bench run`` does), :func:`score_run` (report.json and
  report.html for a run directory), :func:`load_suite`, :func:`score_task` (one trajectory)
- LLMs: :class:`LLMConfig`, :class:`LLMClient`, :class:`Cassette`
- the shipped demo: :func:`demo_paths` (its archive, suite and LLM cassette)
- errors: :class:`WebfreezeError`, the base of every error a user can cause (one line each;
  :class:`ArchiveError`, :class:`RunError` and the rest derive from it)

Example::

    import webfreeze as wf
    with wf.open_archive("site.wfz") as arc:
        for ex in arc.exchanges(prefix="http://example.com/"):
            print(ex.status, ex.url, len(ex.body()))
    wf.run("suite/", "keyword", "runs/kw", backend="text")
    report = wf.score_run("runs/kw")
"""

from importlib import import_module
from importlib.metadata import PackageNotFoundError
from importlib.metadata import version as _version

try:
    __version__ = _version("webfreeze")
except PackageNotFoundError:  # running from a source tree that was never installed
    __version__ = "0.0.0+unknown"

# name -> (module, attribute)
_PUBLIC = {
    "Archive": ("webfreeze.archives", "Archive"),
    "WebfreezeError": ("webfreeze.common.errors", "WebfreezeError"),
    "ArchiveError": ("webfreeze.archives", "ArchiveError"),
    "Exchange": ("webfreeze.archives", "Exchange"),
    "ExchangeRecord": ("webfreeze.archives", "ExchangeRecord"),
    "PageRecord": ("webfreeze.archives", "PageRecord"),
    "DocumentRecord": ("webfreeze.archives", "DocumentRecord"),
    "Replay": ("webfreeze.replayer.replay", "Replay"),
    "ReplayServer": ("webfreeze.replayer.server", "ReplayServer"),
    "WebEnv": ("webfreeze.env", "WebEnv"),
    "EnvConfig": ("webfreeze.simulator.env", "EnvConfig"),
    "Agent": ("webfreeze.agents.base", "Agent"),
    "TaskView": ("webfreeze.agents.base", "TaskView"),
    "make_agent": ("webfreeze.agents", "make_agent"),
    "run": ("webfreeze.runs.execute", "run"),
    "RunError": ("webfreeze.runs.spec", "RunError"),
    "load_suite": ("webfreeze.eval.tasks", "load_suite"),
    "score_task": ("webfreeze.eval.score", "score_task"),
    "score_run": ("webfreeze.eval.report", "write_report"),
    "LLMConfig": ("webfreeze.llm", "LLMConfig"),
    "LLMClient": ("webfreeze.llm", "LLMClient"),
    "Cassette": ("webfreeze.llm", "Cassette"),
    "demo_paths": ("webfreeze.demo", "demo_paths"),
}


def open_archive(path):
    """Open an archive (a ``.wfz`` file or an archive folder) for reading; close it when done."""
    from webfreeze.archives import Archive

    return Archive.open(path)


def import_warc(archive, sources, *, progress=None):
    """Import WARC/ARC/WACZ/HAR files ``sources`` into ``archive`` (created if missing); returns one
    result per source."""
    from webfreeze.archives.importer import import_files

    return import_files(archive, [sources] if isinstance(sources, (str, bytes)) or hasattr(sources, "__fspath__")
                        else list(sources), progress=progress)


def __getattr__(name):
    found = _PUBLIC.get(name)
    if found is None:
        raise AttributeError(f"module 'webfreeze' has no attribute {name!r}")
    return getattr(import_module(found[0]), found[1])


__all__ = sorted([*_PUBLIC, "open_archive", "import_warc", "__version__"])
