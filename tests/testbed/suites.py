"""The test bed's task suites: a few tasks per application with exact answers, each performed once
on the live application by ``record session --script`` (the reference trajectory), into a copy of
the application's crawl archive.

A task's script is the body of a ``run(page)`` function (Playwright); ``record_answer`` logs the
answer. Answers the data decides are computed from the data, not written down twice.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
import textwrap
from dataclasses import dataclass
from pathlib import Path

from .apps import ADMIN_PASSWORD, ADMIN_USER


@dataclass
class TaskSpec:
    id: str
    instruction: str
    start_path: str
    answer: str
    script: str  # the body of run(page)

    def script_file(self) -> str:
        body = textwrap.indent(textwrap.dedent(self.script).strip(), "    ")
        return ("from webfreeze.recorder.session import record_answer\n\n\n"
                "def run(page):\n    page.set_default_timeout(60_000)\n" + body + "\n")


def _datasette_tasks(work: Path) -> list[TaskSpec]:
    with sqlite3.connect(work / "testbed.db") as db:
        poetry = db.execute("SELECT count(*) FROM books WHERE genre = 'poetry'").fetchone()[0]
        oldest = db.execute("SELECT title FROM books ORDER BY year, id LIMIT 1").fetchone()[0]
    return [
        TaskSpec("data-poetry-count", "How many poetry books does the library table list? Answer with a number.",
                 "testbed/books", str(poetry), f"""
            page.get_by_role("link", name="poetry", exact=True).click()
            page.wait_for_load_state("load")
            record_answer(page, "{poetry}", page.locator("h3").first)  # "N rows where genre = ..."
        """),
        TaskSpec("data-oldest-book", "Which book in the library table is the oldest? Answer with its title.",
                 "testbed/books", oldest, f"""
            page.get_by_role("link", name="year", exact=True).click()
            page.wait_for_load_state("load")
            record_answer(page, {oldest!r}, page.locator("td.col-title").first)
        """),
    ]


def _sphinx_tasks(work: Path) -> list[TaskSpec]:
    return [
        TaskSpec("docs-lease-default", "What is the default of lease_seconds in Tidepool? Answer with a number.",
                 "index.html", "300", """
            page.get_by_role("link", name="Configuration", exact=True).first.click()
            page.wait_for_load_state("load")
            record_answer(page, "300", page.get_by_role("cell", name="300", exact=True))
        """),
        # The JavaScript-rendered page: search results are drawn by searchtools.js from searchindex.js.
        # A word on most pages: searchtools.js draws the results one by one, on timers, and fetches
        # each result's page for its summary.
        TaskSpec("docs-search-priority",
                 "Starting from the search results for 'queue', find the highest job priority. Answer with a number.",
                 "search.html?q=queue", "9", """
            page.get_by_text("Search finished").wait_for()
            page.get_by_role("link", name="Queues", exact=True).last.click()
            page.wait_for_load_state("load")
            record_answer(page, "9", page.get_by_text("Every job has a priority from 0 to 9"))
        """),
    ]


def _django_tasks(work: Path) -> list[TaskSpec]:
    return [
        # a login (a CSRF-protected POST, a session cookie) and the admin's pages behind it
        TaskSpec("admin-knots-copies",
                 f"Log in to the staff admin as {ADMIN_USER} (password {ADMIN_PASSWORD}) and find how many copies "
                 "of 'Knots for Small Boats' the library holds. Answer with a number.", "admin/", "4", f"""
            page.get_by_label("Username").fill({ADMIN_USER!r})
            page.get_by_label("Password").fill({ADMIN_PASSWORD!r})
            page.get_by_role("button", name="Log in").click()
            page.wait_for_load_state("load")
            page.get_by_role("link", name="Books", exact=True).first.click()
            page.wait_for_load_state("load")
            row = page.locator("tr", has=page.get_by_role("link", name="Knots for Small Boats"))
            record_answer(page, "4", row.locator("td.field-copies"))
        """),
        TaskSpec("admin-winter-shelf", "On which shelf is 'Winter Storms, 1900-1950'? Answer with the shelf's name.",
                 "", "Lighthouse", """
            page.get_by_role("link", name="Winter Storms, 1900-1950").click()
            page.wait_for_load_state("load")
            record_answer(page, "Lighthouse", page.locator("dd").first, ["Lighthouse"])
        """),
    ]


def _dash_tasks(work: Path) -> list[TaskSpec]:
    # the dropdown is react-select, drawn by JavaScript: typing a city and Enter selects it; the
    # callback's answer (an XHR) redraws the graph (Plotly, random ids) and the summary
    return [TaskSpec("dash-oslo-rain", "Show the rainfall of Oslo in the city dropdown. How many millimetres of "
                     "rain fall in Oslo in a year? Answer with a number.", "", "763", """
            page.get_by_text("Lisbon: ").wait_for()  # the first callback has drawn the summary
            box = page.get_by_role("combobox")
            box.fill("Oslo")
            box.press("Enter")
            page.get_by_text("Oslo: ").wait_for()
            record_answer(page, "763", page.get_by_text("Oslo: 763 mm a year"), evidence=["763"])
        """)]


def _mkdocs_tasks(work: Path) -> list[TaskSpec]:
    # Material's search runs in a web worker (lunr) over the index the page fetched, its results
    # drawn as the term is typed; it reads the box on a keyup or a focus, not on input events
    return [TaskSpec("mkdocs-beadlet-tentacles", "Search the field guide for 'beadlet'. Up to how many tentacles "
                     "does a beadlet anemone have? Answer with a number.", "", "192", """
            page.wait_for_load_state("networkidle")
            box = page.get_by_role("textbox", name="Search")
            box.fill("beadlet")
            box.press("End")
            result = page.locator(".md-search-result__item").first
            result.wait_for()
            record_answer(page, "192", result, evidence=["192 tentacles"])
        """)]  # (Material checks its search toggle by a scripted click: the recorder leaves it out)


def _jspage_tasks(work: Path) -> list[TaskSpec]:
    # each roll is one more message from the page's worker
    return [TaskSpec("jspage-roll", "Roll the dice once. How many worker messages does the page count then? "
                     "Answer with a number.", "index.html", "4", """
            page.get_by_text("Worker messages: 3").wait_for()
            page.get_by_role("button", name="Roll the dice").click()
            page.get_by_text("Worker messages: 4").wait_for()
            record_answer(page, "4", page.get_by_text("Worker messages: 4"), evidence=["Worker messages: 4"])
        """)]


def _bokeh_tasks(work: Path) -> list[TaskSpec]:
    # Bokeh draws its widgets, table and tabs in open shadow roots: the choice in the region select,
    # the click on a tab and the answers' elements are all inside one
    return [
        TaskSpec("bokeh-blue-item", "Choose the South region on the stock page. Which item is blue? Answer with "
                 "its name.", "index.html", "Cobalt kettle", """
            page.get_by_role("link", name="Stock").click()
            page.get_by_role("combobox").select_option("South")
            cell = page.get_by_text("Cobalt kettle", exact=True)
            cell.wait_for()
            record_answer(page, "Cobalt kettle", cell)
        """),
        TaskSpec("bokeh-caravan-town", "Which town does the caravan route reach? Answer with its name.",
                 "index.html", "Timbuktu", """
            page.get_by_role("link", name="Routes").click()
            page.get_by_text("Caravans", exact=True).click()
            route = page.get_by_text("Caravan route: Timbuktu on Tuesdays")
            route.wait_for()
            record_answer(page, "Timbuktu", route, evidence=["Timbuktu on Tuesdays"])
        """),
    ]


TASKS = {"datasette": _datasette_tasks, "sphinx": _sphinx_tasks, "django": _django_tasks,
         "dash": _dash_tasks, "mkdocs": _mkdocs_tasks, "jspage": _jspage_tasks, "bokeh": _bokeh_tasks}
# Suites of JavaScript applications: their tasks need scripts, so they run in the browser backend.
BROWSER_SUITES = {"dash", "mkdocs", "jspage", "bokeh"}


def build_suite(name: str, app, out: Path, webfreeze, home: Path, *, base_archive: Path | None = None,
                only: list[str] | None = None) -> Path:
    """Record each task's session on the live ``app`` into ``out/NAME.wfz`` (a copy of
    ``base_archive`` when given, else a new archive) and write the suite (``out/suite``).
    ``only``: these task ids. Returns the suite folder."""
    from webfreeze.archives import archive_digest
    from webfreeze.eval.authoring import session_time

    out.mkdir(parents=True)
    archive = out / f"{name}.wfz"
    if base_archive is not None:
        shutil.copyfile(base_archive, archive)  # the shared crawl stays as it was
    suite = out / "suite"
    (suite / "references").mkdir(parents=True)
    lines = []
    for spec in TASKS[name](app.log_path.parent):
        if only is not None and spec.id not in only:
            continue
        script = out / f"{spec.id}.py"
        script.write_text(spec.script_file(), encoding="utf-8")
        reference = suite / "references" / f"{spec.id}.json"
        r = webfreeze("record", "session", app.base_url + spec.start_path, "--archive", archive,
                      "--trajectory", reference, "--script", script, "--resolve", app.resolve, home=home)
        if r.returncode != 0:
            raise RuntimeError(f"record session {spec.id} failed: {r.stderr.strip()[-2000:]}")
        lines.append(json.dumps({
            "id": spec.id, "category": name, "instruction": spec.instruction,
            "start_url": app.base_url + spec.start_path,
            # replayed as of its own session (as `tasks add` does), not of the crawl before it
            "snapshot_time": session_time(json.loads(reference.read_text(encoding="utf-8"))),
            "ground_truth": {"answer": {"exact": spec.answer},
                             "reference_trajectory": f"references/{spec.id}.json"}}, sort_keys=True))
    (suite / "tasks.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    manifest = {"format": "webfreeze-suite", "version": 1, "name": f"testbed-{name}",
                "description": f"Test bed tasks on {app.host}.", "archive": f"../{archive.name}",
                "archive_digest": archive_digest(archive), "categories": [name], "site_models": {},
                "tasks": "tasks.jsonl", **({"backend": "browser"} if name in BROWSER_SUITES else {})}
    (suite / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    return suite
