"""`webfreeze drift OLD NEW [--suite S]`: two real recordings of a site whose content changed.

1. The simulated scholar site crawled twice by `record crawl` (real Chromium through real
   mitmproxy), the second time with another seed, as a later snapshot of a live site: the listings
   whose counts changed are reported changed, the pages only one crawl reached added and removed,
   the demo's tasks resting on the changed counts expired, those resting on the home page valid;
   exit 1; the report folder holds the same bytes on a second run.
2. A real application of the test bed (Sphinx): its documentation rebuilt with one value changed
   in one page, crawled again: that page changed, the task whose answer it held expired.
3. An archive against an identical copy of itself: nothing changed, every task valid, exit 0.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from cli_runner import run_cli
from testbed.apps import HERE, free_port, venv_python
from testbed.fixtures import CRAWLS, webfreeze
from testbed.suites import build_suite

from webfreeze.demo import SUITE
from webfreeze.simulator.browser import BrowserUnavailable, chromium_path
from webfreeze.simulator.sites.common import SiteServer
from webfreeze.simulator.sites.scholar import ScholarSite

try:
    chromium_path()
except BrowserUnavailable as exc:
    pytestmark = pytest.mark.skip(reason=str(exc))

HOST = "scholar.test"
# the home page, the two listings whose totals the demo's tasks 009 and 010 ask for, and one more
# page that differs between the two crawls (help in the first, about in the second)
SCOPE = r"^http://scholar\.test/(list/(cs\.CL|stat\.ME)/recent|{extra})?$"
# 001 and 002 are answered on the home page (the same for every seed); 009 and 010 on the listings
# of cs.CL and stat.ME, whose totals change from seed 0 to seed 1 (8 -> 11, 9 -> 8)
TASKS = ["scholar-site-info-001", "scholar-site-info-002", "scholar-site-info-009", "scholar-site-info-010"]


def subset_suite(root: Path, ids: list[str]) -> Path:
    """A suite folder holding some of the demo suite's tasks (same lines, same references)."""
    lines = {json.loads(line)["id"]: line for line in (SUITE / "tasks.jsonl").read_text().splitlines() if line}
    (root / "references").mkdir(parents=True)
    for tid in ids:
        shutil.copyfile(SUITE / "references" / f"{tid}.json", root / "references" / f"{tid}.json")
    manifest = json.loads((SUITE / "manifest.json").read_text())
    manifest.pop("archive", None)
    manifest.pop("archive_digest", None)
    manifest.update(name="drift-subset")
    (root / "manifest.json").write_text(json.dumps(manifest))
    (root / "tasks.jsonl").write_text("".join(lines[t] + "\n" for t in ids))
    return root


def crawl(seed: int, extra: str, archive: Path, home: Path) -> Path:
    site = SiteServer(ScholarSite(seed)).start()
    try:
        port = site.url.rsplit(":", 1)[1].strip("/")
        r = subprocess.run([sys.executable, "-m", "webfreeze", "record", "crawl", f"http://{HOST}/", "--archive",
                            str(archive), "--depth", "1", "--max-pages", "10", "--scope", SCOPE.format(extra=extra),
                            "--resolve", f"{HOST}=127.0.0.1:{port}"],
                           capture_output=True, text=True, timeout=600,
                           env={**os.environ, "WEBFREEZE_HOME": str(home)})
    finally:
        site.stop()
    assert r.returncode == 0, r.stderr[-2000:]
    return archive


@pytest.fixture(scope="module")
def scholar(tmp_path_factory):
    """(OLD, NEW, suite): the scholar site crawled with seed 0, then with seed 1."""
    tmp = tmp_path_factory.mktemp("drift")
    old = crawl(0, "help", tmp / "old.wfz", tmp / "home")
    new = crawl(1, "about", tmp / "new.wfz", tmp / "home")
    return old, new, subset_suite(tmp / "suite", TASKS)


def test_a_changed_seed_expires_the_tasks_on_the_changed_listings(scholar, tmp_path):
    old, new, suite = scholar
    report_dir = tmp_path / "report"
    r = run_cli("drift", old, new, "--suite", suite, "--backend", "text", "--report", report_dir, "--json",
                timeout=900)
    assert r.returncode == 1, r.stderr[-2000:]
    report = json.loads(r.stdout)
    status = {p["url"]: p["status"] for p in report["pages"]}
    # the home page shows the same facts for every seed, but its script prints the clock and a random
    # id: as captured by two crawls, its text differs a little (the clock: the id is the same, the
    # recording browser drawing the replay's numbers) and its first screen not at all
    assert status == {f"http://{HOST}/": "changed", f"http://{HOST}/list/cs.CL/recent": "changed",
                      f"http://{HOST}/list/stat.ME/recent": "changed", f"http://{HOST}/help": "removed",
                      f"http://{HOST}/about": "added"}
    home, listings = report["pages"][0], [p for p in report["pages"] if "/list/" in p["url"]]
    assert 0.9 < home["text_similarity"] < 1.0 and home["pixel_difference"] == 0.0 and home["numbers_only"] is True
    assert all(p["text_similarity"] < 0.5 and p["pixel_difference"] > 0 for p in listings)  # other papers
    verdicts = {t["task_id"]: t["verdict"] for t in report["tasks"]}
    assert verdicts == {"scholar-site-info-001": "valid", "scholar-site-info-002": "valid",
                        "scholar-site-info-009": "expired", "scholar-site-info-010": "expired"}
    why = {t["task_id"]: t["why"] for t in report["tasks"]}
    assert "the pages did not show 'Total of 8 entries'" in why["scholar-site-info-009"]
    assert "the pages did not show 'Total of 9 entries'" in why["scholar-site-info-010"]
    # "Total of 8 entries" is what NEW's stat.ME listing now says, but not where the task found it
    gone = {t["task_id"]: t["evidence_gone"] for t in report["tasks"]}
    assert gone == {"scholar-site-info-001": [], "scholar-site-info-002": [],
                    "scholar-site-info-009": ["Total of 8 entries"], "scholar-site-info-010": ["Total of 9 entries"]}
    assert (report["suite"]["valid"], report["suite"]["expired"], report["suite"]["ambiguous"]) == (2, 2, 0)
    # the report folder: JSON as printed, Markdown and HTML naming the changed pages and the tasks,
    # the screenshots of the changed pages on both sides
    assert json.loads((report_dir / "report.json").read_text()) == report
    md = (report_dir / "report.md").read_text()
    assert "| http://scholar.test/list/cs.CL/recent | changed |" in md
    assert "| scholar-site-info-010 | expired |" in md and "| scholar-site-info-001 | valid |" in md
    html = (report_dir / "report.html").read_text()
    assert "scholar-site-info-009" in html and "http://scholar.test/about" in html
    assert len(list((report_dir / "pages").glob("*.old.*"))) == 3 and len(list((report_dir / "pages").glob("*.new.*"))) == 3
    # deterministic: a second run writes the same bytes (replacing its own earlier report)
    first = {p.relative_to(report_dir): p.read_bytes() for p in sorted(report_dir.rglob("*")) if p.is_file()}
    again = run_cli("drift", old, new, "--suite", suite, "--backend", "text", "--report", report_dir, timeout=900)
    assert again.returncode == 1, again.stderr[-2000:]
    assert {p.relative_to(report_dir): p.read_bytes() for p in sorted(report_dir.rglob("*")) if p.is_file()} == first
    # the table on stdout: the changed pages, the tasks, and the counts
    out = again.stdout
    assert "scholar-site-info-010" in out and "expired" in out and "list/stat.ME/recent" in out
    assert "5 pages: 0 same, 3 changed (1 only in numbers), 1 added, 1 removed; 4 tasks: 2 valid, 0 ambiguous, 2 expired, " \
        "0 broken" in out


def test_an_archive_against_its_copy_has_no_drift(scholar, tmp_path):
    old, _, suite = scholar
    copy = tmp_path / "copy.wfz"
    shutil.copyfile(old, copy)
    r = run_cli("drift", old, copy, "--suite", suite, "--backend", "text", "--json", timeout=900)
    assert r.returncode == 0, r.stderr[-2000:]
    report = json.loads(r.stdout)
    assert report["summary"]["pages"] == 4 and report["summary"]["same"] == 4
    assert report["summary"]["max_pixel_difference"] == 0.0 and report["summary"]["min_text_similarity"] == 1.0
    assert {t["verdict"] for t in report["tasks"]} == {"valid"} and len(report["tasks"]) == 4


def test_pages_only_without_a_suite_and_one_line_errors(scholar, tmp_path):
    old, new, _ = scholar
    r = run_cli("drift", old, new)
    assert r.returncode == 0, r.stderr  # no suite: no task can have expired
    assert "5 pages: 0 same, 3 changed (1 only in numbers), 1 added, 1 removed" in r.stdout
    missing = run_cli("drift", old, tmp_path / "nope.wfz")
    assert missing.returncode == 1 and missing.stderr.strip().splitlines() == [
        f"webfreeze: error: {tmp_path / 'nope.wfz'}: no such archive"]
    # a report folder holding something else is refused, and left as it was
    other = tmp_path / "other"
    other.mkdir()
    (other / "notes.txt").write_text("mine")
    refused = run_cli("drift", old, new, "--report", other)
    assert refused.returncode == 1 and len(refused.stderr.strip().splitlines()) == 1
    assert "holds no drift report" in refused.stderr
    assert sorted(p.name for p in other.iterdir()) == ["notes.txt"]
    assert not list(tmp_path.glob(".other.partial-*"))


# ------------------------------------------------------------------------- a real application
def test_an_edited_page_of_the_sphinx_docs_expires_the_task_it_answers(testbed, tmp_path):
    """The test bed's Sphinx documentation, crawled; its task's reference recorded live into the
    crawl. Then the docs rebuilt with one value changed on one page (lease_seconds 300 -> 600),
    served and crawled again: drift names that page alone and the task expired."""
    app = testbed.app("sphinx")
    suite = build_suite("sphinx", app, tmp_path / "before", webfreeze, testbed.home,
                        base_archive=testbed.crawl("sphinx"), only=["docs-lease-default"])
    old = tmp_path / "before" / "sphinx.wfz"

    src = tmp_path / "docs_src"
    shutil.copytree(HERE / "docs_src", src)
    conf = src / "configuration.rst"
    text = conf.read_text()
    assert text.count("``lease_seconds``  300 ") == 1
    conf.write_text(text.replace("``lease_seconds``  300 ", "``lease_seconds``  600 "))
    html = tmp_path / "html"
    built = subprocess.run([str(venv_python()), "-m", "sphinx", "-q", "-b", "html", "-d", str(tmp_path / "doctrees"),
                            str(src), str(html)], capture_output=True, text=True, timeout=300)
    assert built.returncode == 0, built.stderr[-2000:]
    port = free_port()
    server = subprocess.Popen([sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1", "--directory",
                               str(html)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    new = tmp_path / "after.wfz"
    try:
        _wait_listening(port)
        depth, pages, scope = CRAWLS["sphinx"]
        r = webfreeze("record", "crawl", app.start_url, "--archive", new, "--depth", depth, "--max-pages", pages,
                      "--scope", scope, "--resolve", f"{app.host}=127.0.0.1:{port}", home=testbed.home)
        assert r.returncode == 0, r.stderr[-2000:]
    finally:
        server.terminate()
        server.wait(timeout=10)

    mark = app.mark()
    r = run_cli("drift", old, new, "--suite", suite, "--backend", "text", "--json", timeout=900)
    assert r.returncode == 1, r.stderr[-2000:]
    report = json.loads(r.stdout)
    changed = [p["url"] for p in report["pages"] if p["status"] != "same"]
    assert changed == [f"http://{app.host}/configuration.html"], report["pages"]
    page = report["pages"][[p["url"] for p in report["pages"]].index(changed[0])]
    assert 0.9 < page["text_similarity"] < 1.0 and page["pixel_difference"] > 0
    assert report["summary"]["same"] >= 5 and report["summary"]["added"] == report["summary"]["removed"] == 0
    [task] = report["tasks"]
    assert task["task_id"] == "docs-lease-default" and task["verdict"] == "expired"
    assert "the pages did not show '300'" in task["why"] and task["evidence_gone"] == ["300"]
    assert app.requests_since(mark) == []  # drift replays archives: the application saw nothing


def _wait_listening(port: int) -> None:
    for _ in range(300):  # http.server starts in well under a second; this bounds a broken start
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.1)
    raise AssertionError(f"http.server did not listen on {port}")


# ------------------------------------------------------------------- what makes a task ambiguous
def test_evidence_beside_something_new_is_ambiguous_a_clock_is_not():
    """The rule `drift` applies to a task reached on both archives, on the pages' own HTML."""
    from webfreeze.checks.drift import evidence_moved

    def page(body: str) -> dict:
        return {"dom": f"<html><body><p>Scholar Preprints</p>{body}<script>var x = 'v2';</script></body></html>".encode()}

    url = "http://scholar.test/abs/2401.00001"
    old = {url: page("<ul><li>v1 (12 Jan)</li><li>v2 (latest)</li></ul><p>served 1795918409860</p>")}
    # the fact is still shown, but a newer version now stands beside it: the answer "v2" is in doubt
    newer = {url: page("<ul><li>v1 (12 Jan)</li><li>v2</li><li>v3 (latest)</li></ul><p>served 1795918434023</p>")}
    [moved] = evidence_moved(["v2"], [url], old, newer)
    assert moved == {"url": url, "evidence": "v2", "old": ["v2 (latest)"], "new": ["v2"]}
    # only the clock differs, on its own line or next to the fact: not ambiguous
    clock = {url: page("<ul><li>v1 (12 Jan)</li><li>v2 (latest)</li></ul><p>served 1795918434023</p>")}
    assert evidence_moved(["v2"], [url], old, clock) == []
    beside = {url: page("<ul><li>v1 (12 Jan)</li><li>v2 (latest) 1795918409860</li></ul>")}
    later = {url: page("<ul><li>v1 (12 Jan)</li><li>v2 (latest) 1795918434023</li></ul>")}
    assert evidence_moved(["v2"], [url], beside, later) == []
    # a page outside the task's path, or one archive lacks, says nothing
    assert evidence_moved(["v2"], ["http://scholar.test/"], old, newer) == []
    assert evidence_moved(["v2"], [url], old, {}) == []


def test_evidence_gone_from_a_page_of_the_path_says_so():
    """Roundup's shape: the task opens issue 7 and reads its title there; on OLD the tracker's start
    page listed it too, on NEW the issue was resolved and the list of open issues no longer shows
    it. Still reached (its own page shows the title), but the start page's line is gone: the why
    says the page no longer shows it, not that it "now reads ''"."""
    from webfreeze.checks.drift import _verdict, evidence_moved

    def page(rows: str) -> dict:
        return {"dom": f"<html><body><h1>List of issues</h1><table>{rows}</table></body></html>".encode()}

    url = "http://roundup.test:8917/tracker/"
    old = {url: page("<tr><td>7</td><td>Priority sort is reversed</td><td>need-eg</td></tr>"
                     "<tr><td>3</td><td>Export to CSV drops unicode titles</td></tr>")}
    new = {url: page("<tr><td>3</td><td>Export to CSV drops unicode titles</td></tr>")}
    moved = evidence_moved(["Priority sort is reversed"], [url], old, new)
    assert moved == [{"url": url, "evidence": "Priority sort is reversed",
                      "old": ["Priority sort is reversed"], "new": []}]
    reached = {"reached": True, "misses": [], "end": "answer", "answer": "resolved", "reason": None}
    verdict, why = _verdict(reached, reached, moved)
    assert verdict == "ambiguous"
    assert why == (f"still reached, but {url} no longer shows 'Priority sort is reversed' "
                   "(it read 'Priority sort is reversed')"), why

def test_a_broken_task_says_when_new_misses_too():
    """Syncthing: OLD's capture of the task was incomplete (broken) and NEW's too; the line named
    OLD's gap only and the exit status was 0 though --help says 1 when NEW's capture is incomplete."""
    from webfreeze.checks.drift import _verdict

    miss = {"step": 2, "kind": "xhr", "method": "GET", "url": "http://st.test/rest/svc/random/string?length=10"}
    old = {"reached": False, "misses": [miss], "end": "infeasible", "answer": None, "reason": None}
    new = {"reached": False, "misses": [miss], "end": "infeasible", "answer": None, "reason": None}
    verdict, why = _verdict(old, new, [])
    assert verdict == "broken" and why.count("/rest/svc/random/string") == 2 and "NEW's capture incomplete too" in why
    verdict, why = _verdict(old, {**new, "misses": []}, [])
    assert verdict == "broken" and "NEW" not in why


def test_evidence_in_a_field_s_value_is_read_as_on_the_page():
    """Evidence may stand in a text input's value (an issue's title in an edit form), as
    record_answer and the reference agent read it: drift sees it change there, and never in a
    password or a hidden input."""
    from webfreeze.checks.drift import evidence_blocks, evidence_moved, field_values

    def page(title: str) -> dict:
        return {"dom": (f'<html><body><h1>Issue 3</h1><label>Title <input name="title" value="{title}"></label>'
                        '<input type="hidden" name="t" value="tok"><input type="password" value="pw"></body></html>'
                        ).encode()}

    url = "http://tracker.test/issue3"
    old, new = {url: page("Search ignores accents")}, {url: page("Search ignores accents (wontfix)")}
    assert field_values(old[url]["dom"]) == ["Search ignores accents"]
    assert evidence_blocks(old[url]["dom"], "search ignores accents") == ["Search ignores accents"]
    assert evidence_blocks(old[url]["dom"], "tok") == [] and evidence_blocks(old[url]["dom"], "pw") == []
    [moved] = evidence_moved(["Search ignores accents"], [url], old, new)
    assert moved["old"] == ["Search ignores accents"] and moved["new"] == ["Search ignores accents (wontfix)"]


# ------------------------------------------------------------------- same agent, two snapshots
def test_a_study_over_two_snapshots_separates_drift_from_repeats(scholar, tmp_path):
    """`snapshots = [OLD, NEW]` in a study file: each configuration runs on both archives (cells
    that differ only by archive), and the report sets its success per snapshot side by side."""
    old, new, suite = scholar
    study = tmp_path / "drift-study.toml"
    study.write_text(f'name = "two snapshots"\nsuite = "{suite}"\nsnapshots = ["{old}", "{new}"]\n'
                     'backend = "text"\nrepeats = 2\n\n[[agents]]\nname = "reference"\n', encoding="utf-8")
    out = tmp_path / "study"
    r = run_cli("study", "run", study, "--out", out, timeout=900)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "Success per snapshot" in r.stdout  # the short report printed at the end has the table
    cells = json.loads((out / "study.json").read_text())["cells"]
    assert [(c["id"], c["snapshot"]) for c in cells] == [
        ("reference.snap-old.r0", "old"), ("reference.snap-new.r0", "new"),
        ("reference.snap-old.r1", "old"), ("reference.snap-new.r1", "new")]
    for c in cells:  # each cell ran on its own archive
        manifest = json.loads((out / c["run"] / "manifest.json").read_text())
        assert manifest["circumstances"]["archive_path"].endswith(f"{c['snapshot']}.wfz"), manifest["circumstances"]
    report = json.loads((out / "study-report.json").read_text())
    rates = {cid: c["overall"]["success"]["rate"] for cid, c in report["conditions"].items()}
    assert rates == {"reference.snap-old": 1.0, "reference.snap-new": 0.5}  # 009 and 010 expired on NEW
    md = (out / "study-report.md").read_text()
    assert "## Success per snapshot" in md
    # 8 episodes a snapshot: 100% vs 50% (SE sqrt(.25/8) = 17.7), the repeats identical (± 0.0)
    row = next(line for line in md.splitlines() if line.startswith("| reference |"))
    assert [x.strip() for x in row.strip("|").split("|")] == [
        "reference", "100.0 ± 0.0", "100.0 ± 0.0", "50.0 ± 17.7", "50.0 ± 0.0", "-50.0 ± 17.7"]
    # one snapshot alone is refused, in one line
    study.write_text(f'suite = "{suite}"\nsnapshots = ["{old}"]\n[[agents]]\nname = "reference"\n', encoding="utf-8")
    r = run_cli("study", "run", study, "--out", tmp_path / "other")
    assert r.returncode != 0 and len(r.stderr.strip().splitlines()) == 1 and "snapshots" in r.stderr
    assert not (tmp_path / "other").exists()


# ------------------------------------------------------------------- archives without page records
def _warc(path: Path, pages: dict[str, str], gzipped: tuple = ()) -> Path:
    """A WARC (written by warcio) of HTML responses, one per URL, as another tool would write it;
    the URLs in ``gzipped`` served with ``Content-Encoding: gzip``."""
    import gzip
    from io import BytesIO

    from warcio.statusandheaders import StatusAndHeaders
    from warcio.warcwriter import WARCWriter

    with open(path, "wb") as fh:
        writer = WARCWriter(fh, gzip=True)
        for url, body in pages.items():
            headers = [("Content-Type", "text/html; charset=utf-8")]
            data = body.encode()
            if url in gzipped:
                headers.append(("Content-Encoding", "gzip"))
                data = gzip.compress(data, mtime=0)
            http = StatusAndHeaders("200 OK", headers, protocol="HTTP/1.1")
            writer.write_record(writer.create_warc_record(url, "response", payload=BytesIO(data),
                                                          http_headers=http,
                                                          warc_headers_dict={"WARC-Date": "2026-03-01T00:00:00Z"}))
    return path


def test_archives_without_page_records_compare_their_html_documents(tmp_path):
    """Imported WARCs hold no page records: their HTML documents are compared, by text alone."""
    html = "<html><head><title>{0}</title></head><body><h1>{0}</h1><p>{1}</p></body></html>"
    old_pages = {"http://site.test/": html.format("Home", "Welcome."),
                 "http://site.test/rates": html.format("Rates", "The fee is 30 euros."),
                 "http://site.test/old": html.format("Old", "Gone soon.")}
    new_pages = {"http://site.test/": html.format("Home", "Welcome."),
                 "http://site.test/rates": html.format("Rates", "The fee is 35 euros."),
                 "http://site.test/new": html.format("New", "Just in.")}
    archives = []
    for name, pages in (("old", old_pages), ("new", new_pages)):
        # NEW's server compresses its pages: compared by what they say, not by their bytes
        warc = _warc(tmp_path / f"{name}.warc.gz", pages, gzipped=tuple(pages) if name == "new" else ())
        r = run_cli("archive", "import", warc, "--to", tmp_path / f"{name}.wfz")
        assert r.returncode == 0, r.stderr
        archives.append(tmp_path / f"{name}.wfz")
    r = run_cli("drift", *archives, "--json")
    assert r.returncode == 0, r.stderr
    report = json.loads(r.stdout)
    assert report["old"]["pages_from"] == report["new"]["pages_from"] == "response"
    rows = {p["url"]: (p["status"], p["pixel_difference"]) for p in report["pages"]}
    assert rows == {"http://site.test/": ("same", None), "http://site.test/rates": ("changed", None),
                    "http://site.test/old": ("removed", None), "http://site.test/new": ("added", None)}
    rates = next(p for p in report["pages"] if p["url"].endswith("/rates"))
    assert 0.5 < rates["text_similarity"] < 1.0 and rates["text_changed"] is True


def test_a_crawl_against_a_session_s_archive_compares_like_with_like(tmp_path):
    """A recorded session's archive has no page records; a crawl's page record is the page as its
    scripts drew it. Compared with the session's HTML document as served, every page a script draws
    read as changed (a Bokeh walkthrough: 0.118 on an unchanged site). When one side has no page
    records, both sides offer their HTML documents."""
    from webfreeze.archives import Exchange, new_archive_atomically
    from webfreeze.checks.drift import drift

    served = b"<!doctype html><title>Stock</title><h1>Stock</h1><div id=t></div><script>draw()</script>"
    drawn = b"<!doctype html><title>Stock</title><h1>Stock</h1><div id=t><div>Cobalt</div><div>15</div></div>"
    paths = {}
    for name in ("session", "crawl"):
        paths[name] = tmp_path / f"{name}.wfz"
        with new_archive_atomically(paths[name]) as arc:
            sid = arc.new_session(name, source="test")
            arc.add_exchange(Exchange(url="http://shop.test/", captured_at="2026-01-01T00:00:00Z", status=200,
                                      reason="OK", resp_headers=[("Content-Type", "text/html")], payload=served,
                                      session_id=sid))
            if name == "crawl":
                arc.add_page(session_id=sid, url="http://shop.test/", captured_at="2026-01-01T00:00:00Z",
                             title="Stock", dom=drawn, extra={"shadow_roots": True})
    for old, new in (("session", "crawl"), ("crawl", "session")):
        report = drift(paths[old], paths[new])
        assert report["old"]["pages_from"] == report["new"]["pages_from"] == "response"
        assert [(p["status"], p["text_similarity"]) for p in report["pages"]] == [("same", 1.0)], report["pages"]
    # two crawls still compare their page records
    report = drift(paths["crawl"], paths["crawl"])
    assert report["old"]["pages_from"] == report["new"]["pages_from"] == "page"


def test_the_hash_routes_of_a_single_page_application_are_pages_of_their_own(tmp_path):
    """A Docsify site's pages are routes of one document (``/#/census``), each a page record of a
    crawl: the one whose table changed is changed, the others same; an anchor (``#top``) is still
    the page it is in."""
    from webfreeze.archives import new_archive_atomically

    html = "<html><head><title>{0}</title></head><body><h1>{0}</h1><p>{1}</p></body></html>"
    pages = {"http://docs.test/": ("Home", "Welcome."), "http://docs.test/#/census": ("Census", "2023: 251 otters."),
             "http://docs.test/#/diet": ("Diet", "Crayfish and eels.")}
    archives = []
    for name, changed in (("old", {}), ("new", {"http://docs.test/#/census": ("Census", "2023: 263 otters.")})):
        path = tmp_path / f"{name}.wfz"
        with new_archive_atomically(path) as arc:
            sid = arc.new_session("crawl", source="test", tool="test")
            for url, (title, text) in {**pages, **changed}.items():
                arc.add_page(session_id=sid, url=url, captured_at="2024-03-01T12:00:00Z", title=title,
                             screenshot=None, dom=html.format(title, text).encode(), extra={})
            if name == "new":  # a later capture of the home page, under an anchor
                arc.add_page(session_id=sid, url="http://docs.test/#top", captured_at="2024-03-01T12:00:01Z",
                             title="Home", screenshot=None, dom=html.format("Home", "Welcome.").encode(), extra={})
        archives.append(path)
    r = run_cli("drift", *archives, "--json")
    assert r.returncode == 0, r.stderr
    rows = {p["url"]: p["status"] for p in json.loads(r.stdout)["pages"]}
    assert rows == {"http://docs.test/": "same", "http://docs.test/#/census": "changed",
                    "http://docs.test/#/diet": "same"}, rows


def test_a_changed_page_never_reads_as_identical_in_the_tables(tmp_path):
    """FlaskBB's topic pages drift by a word or a few pixels between two crawls (a view counter):
    'changed' with a text similarity of 1.000 and a pixel difference of 0.0000, as rounding wrote
    them, read as a contradiction, and a word changed in a long page rounded to a similarity of 1.0
    and the page was 'same'. A measure that is not the identical value is never stored or printed
    as it: 0.9999, '>0.999', '<0.0001'."""
    words = " ".join(f"post{i}" for i in range(40000))
    html = "<html><head><title>Topic</title></head><body><p>{}</p><p>Views: {}</p></body></html>"
    archives = []
    for name, views in (("old", 41), ("new", 42)):
        warc = _warc(tmp_path / f"{name}.warc.gz", {"http://forum.test/topic/1": html.format(words, views)})
        r = run_cli("archive", "import", warc, "--to", tmp_path / f"{name}.wfz")
        assert r.returncode == 0, r.stderr
        archives.append(tmp_path / f"{name}.wfz")
    r = run_cli("drift", *archives, "--json")
    (page,) = json.loads(r.stdout)["pages"]
    # (difflib's ratio is 0.99998: rounded to 4 places it was 1.0, and the page was called 'same')
    assert page["status"] == "changed" and page["text_similarity"] == 0.9999 and page["text_changed"] is True
    r = run_cli("drift", *archives, "--report", tmp_path / "report")
    assert r.returncode == 0, r.stderr
    row = next(line for line in r.stdout.splitlines() if "forum.test/topic/1" in line)
    assert "changed" in row and ">0.999" in row and "1.000" not in row
    md = (tmp_path / "report" / "report.md").read_text()
    assert "| http://forum.test/topic/1 | changed (numbers only) | 0.9999 | - |" in md  # (Views: 41 -> 42)
    assert "<td>0.9999</td>" in (tmp_path / "report" / "report.html").read_text()

    from webfreeze.checks.drift import _num
    from webfreeze.checks.replay_check import text_similarity
    assert text_similarity("a b", "a b") == 1.0 and text_similarity("", "") == 1.0
    assert text_similarity("a b", "a c") == 0.5
    import io

    from PIL import Image

    from webfreeze.checks.replay_check import pixel_difference
    shots = []
    for dot in (False, True):  # a 3000x1000 screenshot with one pixel changed: 3.3e-7 of it
        img = Image.new("RGB", (3000, 1000), "white")
        if dot:
            img.putpixel((10, 10), (0, 0, 0))
        buf = io.BytesIO()
        img.save(buf, "PNG")
        shots.append(buf.getvalue())
    assert pixel_difference(shots[0], shots[1]) == 0.000001 and pixel_difference(shots[0], shots[0]) == 0.0
    assert _num(2.9e-05, ".4f", 0.0) == "<0.0001" and _num(0.0, ".4f", 0.0) == "0.0000"
    assert _num(1.0, ".3f", 1.0) == "1.000" and _num(0.5, ".3f", 1.0) == "0.500" and _num(None, ".3f", 1.0) == "-"


def test_a_page_whose_numbers_alone_moved_says_so(tmp_path):
    """A forum's or a tracker's pages say "Published 20 minutes ago" and show view counters: between
    two crawls every page changed, and the report could not tell those from pages whose words
    changed. They are still 'changed' (they did), with ``numbers_only`` and a table that says so;
    a word that changed beside a number is a change of words."""
    from webfreeze.checks.drift import numbers_only

    assert numbers_only("Published 20 minutes ago, 1,204 views", "Published 37 minutes ago, 1,311 views")
    assert numbers_only("on 2026-12-03 at 09:14", "on 2026-12-04 at 10:02")
    assert not numbers_only("Published 1 minute ago", "Published 2 minutes ago")  # (a word moved with it)
    assert not numbers_only("3 open issues", "3 closed issues")
    assert not numbers_only("3 issues", "3 issues here")
    html = "<html><head><title>T</title></head><body><p>{}</p><p>Published {} minutes ago</p></body></html>"
    archives = []
    pages = {"old": {"http://forum.test/a": html.format("Ready", 20), "http://forum.test/b": html.format("Open", 5)},
             "new": {"http://forum.test/a": html.format("Ready", 37), "http://forum.test/b": html.format("Closed", 5)}}
    for name, docs in pages.items():
        warc = _warc(tmp_path / f"{name}.warc.gz", docs)
        r = run_cli("archive", "import", warc, "--to", tmp_path / f"{name}.wfz")
        assert r.returncode == 0, r.stderr
        archives.append(tmp_path / f"{name}.wfz")
    r = run_cli("drift", *archives, "--json")
    report = json.loads(r.stdout)
    rows = {p["url"]: p for p in report["pages"]}
    assert rows["http://forum.test/a"]["status"] == "changed" and rows["http://forum.test/a"]["numbers_only"] is True
    assert rows["http://forum.test/b"]["status"] == "changed" and rows["http://forum.test/b"]["numbers_only"] is False
    assert report["summary"]["changed"] == 2 and report["summary"]["numbers_only"] == 1
    r = run_cli("drift", *archives, "--report", tmp_path / "report")
    assert r.returncode == 0, r.stderr
    assert "2 changed (1 only in numbers)" in r.stdout
    md = (tmp_path / "report" / "report.md").read_text()
    assert "| http://forum.test/a | changed (numbers only) |" in md and "| http://forum.test/b | changed |" in md
    assert "2 changed (2 in their text, 1 of them only in numbers)" in md
