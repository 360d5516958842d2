"""`webfreeze eval report`: report.json (deterministic apart from timings), report.html checked in
real Chromium, the summary table, and bad run directories."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from trajectory_builder import answer_step, step, trajectory, write_run

from webfreeze.eval.report import build_report, summary_table

TASKS = [
    {"id": "info-001", "category": "site-info", "instruction": "How many archives does the site list?",
     "start_url": "http://scholar.test/", "ground_truth": {"answer": {"numeric": 10}}},
    {"id": "info-002", "category": "site-info", "instruction": "Who edits the site?",
     "start_url": "http://scholar.test/", "ground_truth": {"answer": {"normalised": "The editorial committee"}}},
    {"id": "shop-001", "category": "shop", "instruction": "Put P-0042 in the cart",
     "start_url": "http://shop.test/",
     "ground_truth": {"final_state": [{"host": "shop.test", "path": "cart.items", "contains": {"sku": "P-0042"}}]}},
]


def make_trajectories(screenshot_dir: str | None, total_ms: float = 10.0) -> list[dict]:
    def shot(task, i):
        return f"screenshots/{task}/{i}.png" if screenshot_dir else None
    t1 = trajectory("info-001", [
        step("click('5')", "click", url="http://scholar.test/", role="link", name="About",
             url_after="http://scholar.test/about", screenshot=shot("info-001", 0), timing={"agent_ms": total_ms},
             fields={"thought": "The about page lists the archives", "memory": "start: home page"}),
        answer_step("There are 10 archives.", url="http://scholar.test/about")], answer="There are 10 archives.",
        total_ms=total_ms)
    t1["steps"][1]["screenshot"] = shot("info-001", 1)
    t2 = trajectory("info-002", [
        step("click('99')", "click", url="http://scholar.test/", error="no element with bid 99", obs="same",
             fields={"thought": "Try the footer link <b>now</b>"}),
        step("click('99')", "click", url="http://scholar.test/", error="no element with bid 99", obs="same"),
        step("click('99')", "click", url="http://scholar.test/", error="no element with bid 99", obs="same")],
        end="step_limit", total_ms=total_ms)
    t3 = trajectory("shop-001", [
        step("click('7')", "click", url="http://shop.test/p/42", role="button", name="Add to cart",
             url_after="http://shop.test/cart")], end="stopped",
        final_state={"shop.test": {"cart": {"items": [{"sku": "P-0042", "qty": 1}]}}}, total_ms=total_ms)
    return [t1, t2, t3]


@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import sync_playwright

    from webfreeze.simulator.browser import BrowserUnavailable, launch_chromium

    try:
        with sync_playwright() as pw:
            b = launch_chromium(pw)
            yield b
            b.close()
    except BrowserUnavailable as exc:
        pytest.skip(str(exc))


@pytest.fixture
def run_dir(tmp_path, browser):
    """A run directory with real PNG screenshots (taken by Chromium)."""
    from webfreeze.simulator.browser import new_context

    run = write_run(tmp_path / "run", TASKS, make_trajectories("screenshots"),
                    manifest={"agent": {"name": "hand", "config": {}}, "archive_digest": "sha256:abc",
                              "started_at": "2026-01-01T00:00:00Z", "suite": {"name": "mini"}})
    ctx = new_context(browser, viewport={"width": 400, "height": 300})
    page = ctx.new_page()
    for i in range(2):
        page.set_content(f"<body style='background:#2a6'><h1>step {i}</h1></body>")
        target = run / "screenshots" / "info-001" / f"{i}.png"
        target.parent.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(target))
    ctx.close()
    return run


def test_cli_report_writes_json_and_html(run_dir, cli_here):
    r = cli_here("eval", "report", run_dir)
    assert r.returncode == 0, r.stderr
    assert "site-info" in r.stdout and "overall" in r.stdout
    report = json.loads((run_dir / "report.json").read_text())
    assert report["format"] == "webfreeze-report" and report["suite"]["name"] == "mini"
    ov = report["summary"]["overall"]
    # info-001: 10 found -> success; info-002: no answer, step limit while looping; shop-001: cart check passes
    assert (ov["tasks"], ov["success"], ov["loops"], ov["step_limit_loop"]) == (3, 2, 1, 1)
    assert report["summary"]["categories"]["site-info"]["success_rate"] == 0.5
    assert report["tasks"]["info-002"]["behaviour"]["error_category"] == "step_limit_loop"
    # times live only under "timings" (step 0 took 10 ms of agent time, the answer step 1 + 2 ms)
    assert "started_at" not in report["run"] and report["timings"]["manifest"] == {"started_at": "2026-01-01T00:00:00Z"}
    assert report["timings"]["tasks"]["info-001"] == {"total_ms": 10.0, "steps": {"agent_ms": 11.0, "env_ms": 2.0}}
    j = cli_here("eval", "report", run_dir, "--json")
    assert j.returncode == 0 and json.loads(j.stdout) == report
    assert (run_dir / "report.json").read_text() == j.stdout   # sorted keys, same bytes


def test_reports_equal_apart_from_timings(tmp_path):
    a = write_run(tmp_path / "a", TASKS, make_trajectories(None, total_ms=10.0), manifest={"started_at": "1"})
    b = write_run(tmp_path / "b", TASKS, make_trajectories(None, total_ms=99.5), manifest={"started_at": "2"})
    ra, _ = build_report(a)
    rb, _ = build_report(b)
    assert ra["timings"] != rb["timings"]
    ra.pop("timings"), rb.pop("timings")
    assert json.dumps(ra, sort_keys=True) == json.dumps(rb, sort_keys=True)


def test_summary_table_rows(tmp_path):
    report, _ = build_report(write_run(tmp_path / "r", TASKS, make_trajectories(None)))
    table = summary_table(report)
    assert [c.header for c in table.columns][:4] == ["category", "tasks", "success", "rate"]
    cells = [list(c.cells) for c in table.columns]
    assert cells[0] == ["shop", "site-info", "overall"]
    assert cells[3] == ["100.0%", "50.0%", "66.7%"]


def test_html_renders_in_chromium(run_dir, cli_here, browser):
    from webfreeze.simulator.browser import new_context

    assert cli_here("eval", "report", run_dir).returncode == 0
    ctx = new_context(browser)
    page = ctx.new_page()
    errors, requests = [], []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("request", lambda r: requests.append(r.url))
    page.goto((run_dir / "report.html").as_uri())
    page.wait_for_load_state("load")
    # one chart per category plus the overall one, each an inline SVG with a success bar
    charts = page.locator("#charts figure.chart")
    assert charts.count() == 3
    assert [charts.nth(i).get_attribute("data-category") for i in range(3)] == ["shop", "site-info", "overall"]
    widths = page.eval_on_selector_all("#charts rect.bar[data-metric='success']",
                                       "els => els.map(e => parseFloat(e.getAttribute('width')))")
    assert widths == [240.0, 120.0, 160.0]             # success rates 1, 1/2, 2/3 of a 240 px bar
    box = page.locator("#charts svg").first.bounding_box()
    assert box and box["width"] > 100 and box["height"] > 20
    # the trajectory viewer: open a task, its steps show screenshot, action, thought and memory
    page.click("#traj-info-001 > summary")
    steps = page.locator("#traj-info-001 .step")
    assert steps.count() == 2
    first = steps.nth(0)
    assert first.locator("code.action").inner_text() == "click('5')"
    assert "The about page lists the archives" in first.locator(".thought").inner_text()
    assert "start: home page" in first.locator(".memory").inner_text()
    img = first.locator("img")
    img.scroll_into_view_if_needed()
    page.wait_for_function("img => img.complete && img.naturalWidth > 0", arg=img.element_handle())
    assert img.evaluate("i => i.naturalWidth") == 400
    # errors and markup in agent text are shown as text
    page.click("#traj-info-002 > summary")
    s2 = page.locator("#traj-info-002 .step").nth(0)
    assert "no element with bid 99" in s2.locator(".error").inner_text()
    assert "<b>now</b>" in s2.locator(".thought").inner_text()
    assert errors == []
    assert all(u.startswith("file://") for u in requests)   # nothing from the network
    ctx.close()


# ------------------------------------------------------------------------------ bad input
def assert_one_line_failure(r, run: Path, fragment: str):
    assert r.returncode == 1, r.stdout
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("webfreeze: error: ") and fragment in lines[0], r.stderr
    assert not (run / "report.json").exists() and not (run / "report.html").exists()
    assert not list(run.glob(".report*"))                     # no temporary leftovers


def test_malformed_task_line_in_run(tmp_path, cli_here):
    run = write_run(tmp_path / "run", TASKS, make_trajectories(None))
    with open(run / "tasks.jsonl", "a") as f:
        f.write('{"id": "broken", "category": "x", "instruction": "y", "ground_truth": {"answer": {"exact": 1}}}\n')
    assert_one_line_failure(cli_here("eval", "report", run), run,
                            "tasks.jsonl:4: ground_truth.answer.exact must be a string")


def test_bad_trajectory_and_missing_manifest(tmp_path, cli_here):
    run = write_run(tmp_path / "run", TASKS, make_trajectories(None))
    (run / "trajectories" / "info-002.json").write_text('{"format": "webfreeze-trajectory", "version": 1, "task_')
    assert_one_line_failure(cli_here("eval", "report", run), run, "info-002.json: trajectory is not valid JSON")
    (run / "trajectories" / "info-002.json").write_text(json.dumps({"format": "other"}))
    assert_one_line_failure(cli_here("eval", "report", run), run, "not a trajectory")
    (run / "trajectories" / "info-002.json").unlink()
    (run / "manifest.json").unlink()
    assert_one_line_failure(cli_here("eval", "report", run), run, "no run manifest here")
    assert_one_line_failure(cli_here("eval", "report", tmp_path / "nowhere"), tmp_path, "not a run directory")


def test_a_suite_folder_is_not_a_run(tmp_path, cli_here):
    """A suite folder holds a manifest.json and a tasks.jsonl too: scoring it would write a report
    of missing tasks into the user's suite."""
    import shutil

    from webfreeze.demo import SUITE

    suite = tmp_path / "suite"
    shutil.copytree(SUITE, suite)
    before = sorted(p.name for p in suite.rglob("*"))
    assert_one_line_failure(cli_here("eval", "report", suite), suite, "a task suite, not a run directory")
    assert sorted(p.name for p in suite.rglob("*")) == before


def test_missing_trajectory_is_reported_not_fatal(tmp_path):
    run = write_run(tmp_path / "run", TASKS, make_trajectories(None)[:2])
    report, _ = build_report(run)
    assert report["missing"] == ["shop-001"] and report["tasks"]["shop-001"]["outcome"] == "missing"
    assert report["summary"]["categories"]["shop"]["missing"] == 1


@pytest.mark.parametrize("where", ["trajectory", "step"])
def test_a_timing_that_is_not_an_object_is_one_line(tmp_path, cli_here, where):
    run = write_run(tmp_path / "run", TASKS, make_trajectories(None))
    path = run / "trajectories" / "info-001.json"
    t = json.loads(path.read_text())
    if where == "trajectory":
        t["timing"] = "fast"
    else:
        t["steps"][0]["timing"] = "fast"
    path.write_text(json.dumps(t))
    assert_one_line_failure(cli_here("eval", "report", run), run, "'timing' must be an object or null")
