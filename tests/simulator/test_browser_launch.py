"""Which Chromium runs where: the agent environment, replay check and recording prefer Debian's
headless shell (no browser UI: a fresh context opens no omnibox WebUI renderers), a PDF and a
--headed session the full browser, and $WEBFREEZE_CHROMIUM overrides both."""

from __future__ import annotations

import os
import shutil

import pytest

from webfreeze.simulator.browser import BrowserUnavailable, browser_build, chromium_path, launch_chromium, new_context

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


# ------------------------------------------------------------------ a browser that cannot start
def _no_files_like(folder, name: str) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.startswith(name))


def test_headed_session_without_a_display_is_one_line_and_makes_nothing(tmp_path, cli, monkeypatch):
    from cli_runner import assert_one_line_error

    from webfreeze.simulator.sites import serve

    monkeypatch.delenv("DISPLAY", raising=False)
    monkeypatch.delenv("WAYLAND_DISPLAY", raising=False)
    site = serve("scholar")
    try:
        result = cli("record", "session", f"{site.url}/", "--archive", tmp_path / "s.wfz",
                     "--trajectory", tmp_path / "t.json", "--headed")
    finally:
        site.stop()
    line = assert_one_line_error(result, contains="needs a display")
    assert "xvfb-run" in line and "--script" in line
    assert _no_files_like(tmp_path, "s.wfz") == [] and not (tmp_path / "t.json").exists()


@pytest.fixture
def broken_chromium(tmp_path, monkeypatch):
    """A real executable that fails the way a Chromium that cannot start does: a log line, exit 1."""
    exe = tmp_path / "broken-chromium"
    exe.write_text("#!/bin/sh\n"
                   "echo '[1:1:1123/000000.000000:ERROR:dbus/bus.cc:405] Failed to connect to the bus' >&2\n"
                   "echo '[1:1:1123/000000.000000:FATAL:zygote_host_impl_linux.cc:127] No usable sandbox here' >&2\n"
                   "exit 1\n")
    exe.chmod(0o755)
    monkeypatch.setenv("WEBFREEZE_CHROMIUM", str(exe))
    return exe


def test_a_browser_that_will_not_start_is_one_line_and_leaves_no_new_archive(tmp_path, cli, broken_chromium):
    from cli_runner import assert_one_line_error

    from webfreeze.archives import Archive
    from webfreeze.simulator.sites import serve

    script = tmp_path / "drive.py"
    script.write_text("def run(page):\n    pass\n")
    site = serve("scholar")
    try:
        crawl = cli("record", "crawl", f"{site.url}/", "--archive", tmp_path / "c.wfz", "--depth", "0")
        session = cli("record", "session", f"{site.url}/", "--archive", tmp_path / "s.wfz",
                      "--trajectory", tmp_path / "t.json", "--script", script)
        Archive.create(tmp_path / "kept.wfz").close()
        into_existing = cli("record", "crawl", f"{site.url}/", "--archive", tmp_path / "kept.wfz", "--depth", "0")
    finally:
        site.stop()
    for result in (crawl, session, into_existing):
        line = assert_one_line_error(result, contains="did not start")
        assert str(broken_chromium) in line
        # the cause from Chromium's log, not the D-Bus noise before it
        assert line.endswith("its log says: No usable sandbox here"), line
    # archives the failed recordings created are gone; the one that existed stays
    assert _no_files_like(tmp_path, "c.wfz") == [] and _no_files_like(tmp_path, "s.wfz") == []
    assert not (tmp_path / "t.json").exists()
    assert cli("archive", "verify", tmp_path / "kept.wfz").returncode == 0


def test_a_browser_that_exits_silently_is_reported_with_its_exit_status(tmp_path, monkeypatch):
    from playwright.sync_api import sync_playwright

    exe = tmp_path / "silent-chromium"
    exe.write_text("#!/bin/sh\nexit 3\n")
    exe.chmod(0o755)
    monkeypatch.setenv("WEBFREEZE_CHROMIUM", str(exe))
    with sync_playwright() as pw:
        with pytest.raises(BrowserUnavailable) as caught:
            launch_chromium(pw)
    message = str(caught.value)
    assert "\n" not in message and message.startswith(f"Chromium ({exe}) did not start")
    assert message.endswith("it ended with exit status 3 and logged no error"), message


def test_a_screenshot_that_times_out_is_asked_for_again():
    """A page whose main thread is busy for 5 s cannot be photographed within 0.5 s: the first
    screenshot (given that short timeout here) times out for real, the next one (with the real
    SHOT_TIMEOUT_MS, after the page is free again) comes."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout
    from playwright.sync_api import sync_playwright

    from webfreeze.simulator import browser as browser_module

    # (5 s, not less: the console message must reach this process and the screenshot request the
    # page while the loop still runs, which on a loaded machine can take a second or more)
    html = ("<p>busy for a while</p><script>setTimeout(() => { console.log('busy loop starts');"
            " const end = Date.now() + 5000; while (Date.now() < end) {} }, 50)</script>")
    outcomes = []
    with sync_playwright() as pw:
        browser = launch_chromium(pw)
        try:
            page = new_context(browser).new_page()
            with page.expect_console_message(lambda m: m.text == "busy loop starts", timeout=60_000):
                page.set_content(html)
            real = page.screenshot

            def counted(**kwargs):
                if not outcomes:
                    kwargs["timeout"] = 500  # only the first attempt is meant to time out
                try:
                    shot = real(**kwargs)
                except PlaywrightTimeout:
                    outcomes.append("timeout")
                    raise
                outcomes.append("shot")
                return shot
            page.screenshot = counted
            shot = browser_module._screenshot(page, False)
        finally:
            browser.close()
    assert shot[:8] == b"\x89PNG\r\n\x1a\n"
    assert outcomes == ["timeout", "shot"]


def _a_font_file() -> str | None:
    import glob

    for pattern in ("/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf", "/usr/share/fonts/truetype/*/*.ttf",
                    "/usr/share/fonts/**/*.ttf"):
        found = sorted(glob.glob(pattern, recursive=True))
        if found:
            return found[0]
    return None


@pytest.mark.skipif(not SHELL, reason="chromium-headless-shell is not installed")
def test_a_web_font_renders_the_same_in_both_binaries(monkeypatch, tmp_path):
    """An archive crawled in the full browser (as crawls were until 2026-12-05) is replayed by
    `replay check` in the headless shell. The full browser hints a web font (an `@font-face` one: VitePress's Inter) as
    fontconfig says, ignoring `--font-render-hinting`, which the shell obeys; with `none` given, every
    glyph edge of such a page differed (replay check: pixel difference 0.004 on every page of an
    untouched VitePress site). System fonts go through fontconfig in both and always agreed."""
    import functools
    import http.server
    import io
    import threading

    from PIL import Image, ImageChops
    from playwright.sync_api import sync_playwright

    font = _a_font_file()
    if not font:
        pytest.skip("no TrueType font installed")
    shutil.copy(font, tmp_path / "f.ttf")
    (tmp_path / "index.html").write_text(
        "<!doctype html><html><head><style>@font-face{font-family:W;src:url(f.ttf)}"
        "body{font:16px W;margin:8px}</style></head><body><p>A queue holds jobs in order. Each queue has"
        " a name and a priority.</p><h1>Visibility timeout</h1></body></html>")
    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=str(tmp_path)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    monkeypatch.delenv("WEBFREEZE_CHROMIUM", raising=False)
    shots = {}
    try:
        with sync_playwright() as pw:
            for shell in (False, True):
                browser = launch_chromium(pw, shell=shell)
                try:
                    page = new_context(browser, viewport={"width": 600, "height": 120}).new_page()
                    page.goto(f"http://127.0.0.1:{server.server_port}/index.html")
                    assert page.evaluate("document.fonts.ready.then(() => document.fonts.check('16px W'))")
                    shots[shell] = Image.open(io.BytesIO(page.screenshot())).convert("RGB")
                finally:
                    browser.close()
    finally:
        server.shutdown()
        server.server_close()
    diff = ImageChops.difference(shots[False], shots[True])
    assert min(low for low, _ in shots[False].getextrema()) < 128  # the text was drawn
    assert diff.getbbox() is None, f"the two binaries drew the web font differently within {diff.getbbox()}"
