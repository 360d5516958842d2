"""Which Chromium runs where: the agent environment prefers Debian's headless shell (no browser UI:
a fresh context opens no omnibox WebUI renderers), recording keeps the full browser, and
$WEBFREEZE_CHROMIUM overrides both."""

from __future__ import annotations

import os
import shutil

import pytest

from webfreeze.simulator.browser import (BrowserUnavailable, browser_build, chromium_path, launch_chromium,
                                         new_context)

try:
    chromium_path()
except BrowserUnavailable as exc:
    pytestmark = pytest.mark.skip(reason=str(exc))

SHELL = shutil.which("chromium-headless-shell")


def test_full_browser_unless_the_shell_is_asked_for(monkeypatch):
    monkeypatch.delenv("WEBFREEZE_CHROMIUM", raising=False)
    full = chromium_path()
    assert os.path.basename(full) != "chromium-headless-shell"
    if SHELL:
        assert chromium_path(shell=True) == SHELL
    else:
        assert chromium_path(shell=True) == full  # the fallback where the package is missing


def test_the_environment_variable_overrides_both(monkeypatch, tmp_path):
    exe = tmp_path / "my-chromium"
    monkeypatch.setenv("WEBFREEZE_CHROMIUM", str(exe))
    assert chromium_path() == str(exe)
    assert chromium_path(shell=True) == str(exe)
    assert browser_build(shell=True) is None  # not executable: no version to report, no exception


def test_browser_build_names_executable_and_version(monkeypatch):
    monkeypatch.delenv("WEBFREEZE_CHROMIUM", raising=False)
    build = browser_build(shell=True)
    assert build is not None and "Chromium" in build
    assert build.split()[0] == os.path.basename(chromium_path(shell=True))


@pytest.mark.skipif(not SHELL, reason="chromium-headless-shell is not installed")
def test_shell_contexts_open_no_browser_ui(monkeypatch):
    """The reason for the shell: the full browser opens omnibox WebUI targets for every context."""
    from playwright.sync_api import sync_playwright

    monkeypatch.delenv("WEBFREEZE_CHROMIUM", raising=False)
    created: dict[bool, list] = {}
    versions = set()
    with sync_playwright() as pw:
        for shell in (True, False):
            browser = launch_chromium(pw, shell=shell)
            try:
                versions.add(browser.version)
                cdp = browser.new_browser_cdp_session()
                types: list = []
                cdp.on("Target.targetCreated", lambda e, types=types: types.append(e["targetInfo"]["type"]))
                cdp.send("Target.setDiscoverTargets", {"discover": True})
                types.clear()  # only what the context below creates
                context = new_context(browser)
                page = context.new_page()
                page.set_content("<p>hello</p>")
                assert page.locator("p").inner_text() == "hello"
                context.close()
                created[shell] = list(types)
            finally:
                browser.close()
    assert len(versions) == 1  # the same Chromium build, with and without the browser's UI
    assert created[True].count("page") == 1 and "browser_ui" not in created[True], created[True]
    assert created[False].count("page") == 1, created[False]
