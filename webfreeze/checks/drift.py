"""``webfreeze drift OLD NEW``: how a site changed between two snapshots, and what it did to a suite.

Two archives of the same site (two crawls months apart, a live run's archive and a later one) are
compared page by page, with ``replay check``'s measures:

- the pages of each archive are its page records (``record crawl``, ``record session``); an archive
  without any (a proxy recording) offers its HTML documents instead (GET, status 200, ``text/html``),
  text only. Where a URL was captured more than once, its latest capture stands for it;
- a page in both is compared by the text similarity of its visible text (``difflib`` ratio of the
  whitespace-normalised words, 1.0 = identical) and the pixel difference of its screenshots (the
  share of differing pixels, 0.0 = identical; None when either has none): ``same`` when both say
  identical, else ``changed`` (``text_changed`` says whether its words did, or only its look;
  ``numbers_only`` whether the words that changed differ only in their digits: "20 minutes ago"
  -> "37 minutes ago", a counter, a date);
- pages only in NEW are ``added``, pages only in OLD ``removed``.

Pages are compared as captured, not replayed: drift is about what the site showed, and the
captures are that record (``replay check`` says whether each archive replays its own captures).

With a suite, each task's reference trajectory is replayed by the reference agent on both archives
(as ``tasks validate`` does), and each task gets one verdict:

- ``valid``: reached on both, and its evidence reads the same where it is shown;
- ``ambiguous``: reached on both, but on a page of its path the innermost element holding an
  evidence string of its answer (a sentence, a table row, a list item) reads differently: the fact
  still shows, next to something new (another version, another count), so it may no longer be the
  only right answer; someone should look. A clock or a session id elsewhere on the page, or a clock
  reading (ten digits or more) beside the evidence, does not make a task ambiguous (the page is
  still listed as changed: it did change);
- ``incomplete``: reached on OLD with a complete capture, but a document or XHR its replay asks for
  on NEW is not in NEW (why: ``incomplete capture in NEW``, naming the reference step and the
  URL): not captured, which says nothing of the site; re-record it before judging the task;
- ``expired``: reached on OLD, not on NEW, everything it asked for captured in both (why: ``changed
  on the site``, then the reference's own words, e.g. the evidence the pages no longer show, or
  the link that is gone);
- ``broken``: not reached on OLD already, or OLD's capture incomplete: the archive pair says
  nothing about its drift.

Apart from the replay, ``evidence_gone`` lists for each task the evidence strings of its reference
answer that a page of its path shows on OLD and no longer shows on NEW ("answers whose evidence is
gone"; the same fact on another page of NEW does not bring it back).

The report (``report.json``, ``report.md``, ``report.html`` and the screenshots of changed pages)
is a pure function of the two archives and the suite: no times, no paths, only file names and
digests, so two runs write the same bytes. It is built in a temporary folder beside the report
folder and renamed into place, so a failure leaves the previous report (or none), never half of one.
"""

from __future__ import annotations

import fnmatch
import glob
import html as htmlmod
import json
import os
import re
import shutil
import tempfile
from collections.abc import Mapping
from pathlib import Path

import lxml.etree
import lxml.html
from rich.console import Console
from rich.table import Table

from webfreeze.archives import Archive, ArchiveError, archive_digest
from webfreeze.checks.replay_check import image_ext, pixel_difference, shadow_roots, text_similarity, visible_text
from webfreeze.common.errors import WebfreezeError
from webfreeze.common.files import json_text
from webfreeze.common.http import page_url
from webfreeze.common.text import UNSHOWN_INPUT_TYPES, fold_text
from webfreeze.eval.authoring import capture_misses, describe_miss, recorded_answer, reference_reached, session_time
from webfreeze.eval.report import build_report
from webfreeze.eval.tasks import SUITE_FORMAT, SUITE_VERSION, load_suite
from webfreeze.runs.execute import execute
from webfreeze.runs.prepare import prepare
from webfreeze.runs.spec import build_run

REPORT_FORMAT = "webfreeze-drift"
REPORT_VERSION = 1
VERDICTS = ("valid", "ambiguous", "incomplete", "expired", "broken")
DEFAULT_BACKEND = "browser"  # as `bench run` and `tasks validate`: the suite's own, else the browser


class DriftError(WebfreezeError):
    """A drift comparison that cannot be made (a missing archive, nothing to compare, a report
    folder that must not be replaced); one line."""


# ------------------------------------------------------------------------------------------ pages
class Snapshot(Mapping):
    """The pages of an open archive by URL (an anchor's fragment dropped, a hash route's kept:
    :func:`~webfreeze.common.http.page_url`), read lazily: ``snapshot[url]`` is
    ``{"dom", "shot", "title"}`` (``shot``: image bytes or None), its bytes read from the archive
    when asked for, so a crawl of thousands of pages is never held in memory at once. The pages are
    the page records; an archive without any offers its HTML documents (GET, 200, ``text/html``),
    without screenshots (``source`` says which), and so does any archive with ``responses``. The
    latest capture of a URL stands for it."""

    def __init__(self, arc: Archive, *, responses: bool = False):
        self.records: dict[str, object] = {}
        for p in [] if responses else sorted(arc.pages(), key=lambda p: (p.captured_at, p.id)):
            self.records[page_url(p.url)] = p
        self.source = "page" if self.records else "response"
        if not self.records:
            for ex in arc.exchanges(method="GET", status=200, mime="text/html", kind="response", order="time"):
                self.records[page_url(ex.url)] = ex
        self._text: dict[str, str] = {}

    def __getitem__(self, url: str) -> dict:
        rec = self.records[url]
        if self.source == "page":  # ("shadow": whether its DOM holds the page's open shadow roots)
            return {"dom": rec.dom() or b"", "shot": rec.screenshot(), "title": rec.title,
                    "shadow": shadow_roots({"extra": rec.extra})}
        try:
            dom = rec.body()  # the content coding (gzip, br, ...) removed
        except ArchiveError:  # a coding that does not decode: the stored bytes, as they are
            dom = rec.payload()
        return {"dom": dom, "shot": None, "title": ""}

    def __iter__(self):
        return iter(self.records)

    def __len__(self) -> int:
        return len(self.records)

    def folded_text(self, url: str) -> str:
        """The page's visible text folded as evidence is (:func:`fold_text`); "" when absent."""
        if url not in self.records:
            return ""
        if url not in self._text:
            dom = self[url]["dom"]
            self._text[url] = fold_text(" ".join([visible_text(dom), *field_values(dom)]))
        return self._text[url]


UNSHOWN_INPUTS = frozenset(UNSHOWN_INPUT_TYPES)  # (record_answer's rule, one list: common/text.py)


def field_values(dom: bytes) -> list[str]:
    """The values a page's text inputs show (their ``value`` attributes), which evidence may stand
    on as on the page's text (``record_answer`` and the reference agent read them too); a text
    area's text is in the page's text already."""
    if not dom or not dom.strip():
        return []
    try:
        root = lxml.html.document_fromstring(dom)
    except (lxml.etree.ParserError, ValueError):
        return []
    return [el.get("value") for el in root.iter("input")
            if el.get("value") and (el.get("type") or "text").lower() not in UNSHOWN_INPUTS]


def compare_pages(old: Mapping[str, dict], new: Mapping[str, dict], progress=None) -> list[dict]:
    """One row per URL of either archive (``URL -> {dom, shot, title}``, e.g. :class:`Snapshot`),
    in URL order: ``status`` (same, changed, added, removed), ``text_similarity`` and
    ``pixel_difference`` for pages in both. ``progress(n)`` after each."""
    rows = []
    for n, url in enumerate(sorted(set(old) | set(new)), 1):
        a, b = old.get(url), new.get(url)
        row = {"url": url, "title": (b or a)["title"], "text_similarity": None, "pixel_difference": None,
               "text_changed": None, "numbers_only": None}
        if a is None:
            row["status"] = "added"
        elif b is None:
            row["status"] = "removed"
        else:
            # (an archive crawled before snapshots held shadow roots: both compared without them)
            shadow = a.get("shadow", True) and b.get("shadow", True)
            text_a, text_b = visible_text(a["dom"], shadow=shadow), visible_text(b["dom"], shadow=shadow)
            sim = text_similarity(text_a, text_b)
            pixels = pixel_difference(a["shot"], b["shot"])
            row.update(text_similarity=sim, pixel_difference=pixels, text_changed=sim < 1.0,
                       numbers_only=numbers_only(text_a, text_b) if sim < 1.0 else None)
            row["status"] = "changed" if sim < 1.0 or (pixels or 0.0) > 0.0 else "same"
        rows.append(row)
        if progress:
            progress(n)
    return rows


_DIGITS = re.compile(r"\d+")


def numbers_only(a: str, b: str) -> bool:
    """Whether two texts that differ have the same words once every run of digits is read as one
    and the same number: only numbers moved (a relative time, a view counter, a date), not what
    the page says around them. Word by word, as :func:`text_similarity` splits them; ours (a
    sign, a unit or a plural that changes with the number, "1 minute" -> "2 minutes", is a word
    that changed)."""
    wa, wb = a.split(), b.split()
    return len(wa) == len(wb) and all(x == y or _DIGITS.sub("0", x) == _DIGITS.sub("0", y) for x, y in zip(wa, wb))


# ------------------------------------------------------------------------------------------ tasks
def answer_evidence(reference: dict | None) -> list[str]:
    """The evidence strings of a reference trajectory's last answer (its text when it names none)."""
    answers = [s for s in (reference or {}).get("steps") or [] if isinstance(s, dict) and s.get("action") == "answer"]
    if not answers:
        return []
    value = answers[-1].get("value")
    evidence = value.get("evidence") if isinstance(value, dict) else None
    if isinstance(evidence, list) and evidence:
        return [str(e) for e in evidence]
    said = recorded_answer(reference)
    return [said] if said else []


def validate_references(suite, archive: Path, *, backend: str, workers: int = 1, tasks=(), limit=None,
                        progress=None) -> dict[str, dict]:
    """Replay each selected task's reference trajectory on ``archive`` with the reference agent (a
    run in a temporary folder, removed afterwards); per task id: ``reached`` (the ground truth),
    ``end`` (how the episode ended), ``answer``, ``reason`` (the reference's own account when it
    gave up), ``misses`` (the documents and XHR the archive could not answer,
    :func:`~webfreeze.eval.authoring.capture_misses`) and ``visited`` (the URLs of its pages,
    fragments dropped, sorted). ``progress(summary)`` after each episode."""
    tmp = Path(tempfile.mkdtemp(prefix="webfreeze-drift-"))
    try:
        out = tmp / "run"
        suite = retimed_suite(suite, archive, tmp / "suite")
        prep = prepare(*build_run(suite, "reference", out, archive=archive, workers=workers, backend=backend,
                                  tasks=list(tasks), limit=limit))
        execute(prep, progress=progress)
        report, trajectories = build_report(out)
        references = {t.id: t.reference for t in load_suite(str(suite)).tasks}
        result = {}
        for tid, r in sorted(report["tasks"].items()):
            traj = trajectories.get(tid) or {}
            end = traj.get("end") if isinstance(traj.get("end"), dict) else {}
            reason = end.get("detail") if end.get("reason") == "infeasible" else None
            visited = {page_url(u) for st in traj.get("steps") or [] if isinstance(st, dict)
                       for u in (st.get("url"), st.get("url_after")) if isinstance(u, str) and u}
            if traj.get("final_url"):
                visited.add(page_url(traj["final_url"]))
            reached = reference_reached(r)
            result[tid] = {"reached": reached, "end": r.get("end_reason") or r["outcome"], "answer": r.get("answer"),
                           "reason": reason or None,
                           "misses": note_captured(archive, capture_misses(traj, reached=reached),
                                                   references.get(tid)),
                           "visited": sorted(visited)}
        return result
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def recorded_again(archive, reference: dict) -> dict | None:
    """The session of ``archive`` that recorded ``reference``'s task again, when the archive does not
    hold the reference's own session (the newer snapshot of ``drift``): among the sessions whose
    reference trajectory the archive keeps (``trajectories/<session>.json``, ``record session``) with
    the same start page, one with the same steps (as the reference agent takes them), else one with
    the same instruction; the latest of them. None when the archive holds the reference's session,
    or no session matches."""
    from webfreeze.eval.authoring import session_actions

    sid = reference.get("archive_session")
    start = page_url(str(reference.get("start_url") or ""))
    with Archive.open(archive) as arc:
        if isinstance(sid, str) and arc.session(sid) is not None:
            return None
        found = []
        for doc in arc.documents(prefix="trajectories/"):
            try:
                other = doc.body()
            except (ValueError, ArchiveError):
                continue
            if isinstance(other, dict) and page_url(str(other.get("start_url") or "")) == start:
                found.append(other)
    # (steps compared with redaction placeholders set aside: each redaction draws its own key, so a
    # password typed in both sessions has another placeholder in each)
    steps = [_unplaced(str(a)) for a in session_actions(reference)]
    said = reference.get("instruction")
    for same in (lambda o: [_unplaced(str(a)) for a in session_actions(o)] == steps,
                 lambda o: bool(said) and _unplaced(str(o.get("instruction"))) == _unplaced(str(said))):
        matched = [o for o in found if same(o) and session_time(o)]
        if matched:
            return max(matched, key=lambda o: (session_time(o), str(o.get("archive_session"))))
    return None


def _unplaced(text: str) -> str:
    """``text`` with each redaction placeholder as one mark."""
    from webfreeze.archives.redact import PLACEHOLDER_RE

    return PLACEHOLDER_RE.sub("wfredacted-*", text)


def placeholders_moved(reference: dict, again: dict) -> dict[str, str]:
    """The redaction placeholders of ``reference`` and those standing at the same places in
    ``again`` (its task recorded again and redacted apart, :func:`recorded_again`), where the two
    sessions took the same steps: each redaction draws its own key, so the same password is
    ``wfredacted-4ecc...`` in one and ``wfredacted-157d...`` in the other. Empty when nothing moved."""
    from webfreeze.eval.authoring import session_actions

    mine, theirs = ([str(a) for a in session_actions(r)] for r in (reference, again))
    if len(mine) != len(theirs) or [_unplaced(a) for a in mine] != [_unplaced(a) for a in theirs]:
        return {}
    from webfreeze.archives.redact import PLACEHOLDER_RE

    moved: dict[str, str] = {}
    for a, b in zip(mine, theirs):
        for old, new in zip(PLACEHOLDER_RE.findall(a), PLACEHOLDER_RE.findall(b)):
            if old != new and moved.setdefault(old, new) != new:
                return {}  # (one placeholder for two: not one secret's)
    return moved


def retimed_suite(suite, archive, work: Path):
    """``suite``, or, when some of its tasks were recorded again into ``archive`` in sessions of
    their own (:func:`recorded_again`), a copy in ``work`` whose lines for those tasks take that
    session's start as their ``snapshot_time``. A task is replayed among the captures nearest its
    ``snapshot_time``: on a newer snapshot, the older session's time put it among the snapshot's
    earliest captures (its crawl's, logged out) rather than its own session's (FlaskBB: a login
    task read the crawl's pages and expired). Where both sessions were redacted apart, the task's
    placeholders become the new session's (:func:`placeholders_moved`): the reference then types
    the password as the archive's session sent it (Roundup's login)."""
    loaded = load_suite(str(suite))
    times = {}
    moved: dict[str, dict[str, str]] = {}
    for t in loaded.tasks:
        again = recorded_again(archive, t.reference) if isinstance(t.reference, dict) else None
        if again is not None and session_time(again) != t.snapshot_time:
            times[t.id] = session_time(again)
        placed = placeholders_moved(t.reference, again) if again is not None else {}
        if placed:  # the secret the reference types, as the session recorded again (redacted apart) sent it
            moved[t.id] = placed
    if not times and not moved:
        return suite
    # (a copy of the lines alone, each reference inline: the suite's folder may hold anything)
    work.mkdir(parents=True)
    lines = []
    for t in loaded.tasks:
        obj = dict(t.raw)
        if t.reference is not None:  # (a task with no reference keeps its ground truth as it is)
            obj["ground_truth"] = {**t.raw["ground_truth"], "reference_trajectory": t.reference}
        if t.id in times:
            obj["snapshot_time"] = times[t.id]
        line = json.dumps(obj, ensure_ascii=False, sort_keys=True)
        for old, new in sorted(moved.get(t.id, {}).items()):
            line = line.replace(old, new)
        lines.append(line)
    (work / "tasks.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    manifest = {k: v for k, v in (loaded.manifest or {}).items() if k not in ("archive", "archive_digest", "tasks")}
    personas = manifest.get("personas")
    if isinstance(personas, dict) and isinstance(personas.get("path"), str):  # (a folder beside the suite's)
        manifest["personas"] = {**personas, "path": str((Path(loaded.root) / personas["path"]).resolve())}
    manifest.update({"format": SUITE_FORMAT, "version": SUITE_VERSION, "name": loaded.name, "tasks": "tasks.jsonl"})
    (work / "manifest.json").write_text(json.dumps(manifest, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return work


def note_captured(archive, misses: list[dict], reference: dict | None = None) -> list[dict]:
    """``misses`` (:func:`~webfreeze.eval.authoring.capture_misses`), each with ``captured`` when
    ``archive`` holds the request otherwise, so the line that names it does not send the author
    to record what was recorded: ``body`` (the same method and URL: honest matching turned down its
    body, a timestamp a save carries), ``redacted`` (such a body holding redaction placeholders: an
    archive redacted apart from the one the reference was, whose placeholders differ), ``kind``
    (the same method and URL, but only as another kind of request: a form's submission where the
    replayed page's script sent it, which the recorded page never did; a timer that ran out in the
    replay but not in the session, Wagtail's autosave) or ``query`` (the same method, host and
    path). A WebSocket whose conversation parted gets ``session`` "absent" (and
    ``reference_session``) when ``archive`` holds neither the session ``reference`` (the task's
    reference trajectory) was recorded in nor one that recorded it again (:func:`recorded_again`):
    its socket was answered from another session's conversation, and recording the task into the
    archive mends it. Unchanged when the archive cannot be read."""
    from urllib.parse import urlsplit

    from webfreeze.archives import Archive
    from webfreeze.eval.authoring import WEBSOCKET_PARTED_WORDS

    def path_of(url: str) -> tuple:
        u = urlsplit(url)
        return (u.netloc.lower(), u.path or "/")

    try:
        arc = Archive.open(archive)
    except Exception:
        return misses
    out = []
    with arc:
        for m in misses:
            m = dict(m)
            url, method = str(m.get("url") or ""), str(m.get("method") or "GET")
            if url.startswith(("http:", "https:")):
                held = list(arc.exchanges(url=url, method=method, limit=20))
                if held:
                    alike = [ex for ex in held if _fetched_as(ex) in (None, m.get("kind") == "document")]
                    if method.upper() not in ("GET", "HEAD") and not alike:
                        m["captured"] = "kind"
                    elif method.upper() not in ("GET", "HEAD"):  # (a GET has no body: missed for another cause)
                        # a body holding redaction placeholders: most likely the reference's own were
                        # drawn by another redaction (each draws its key), not a change of the site
                        m["captured"] = ("redacted" if any(_placeholders(ex) for ex in alike)
                                         else "long_body" if all(_long_body(ex) for ex in alike) else "body")
                else:
                    base = url.split("?", 1)[0].split("#", 1)[0]
                    others = [ex.url for ex in arc.exchanges(prefix=base, method=method, limit=200)
                              if path_of(ex.url) == path_of(base)]
                    if others:
                        m["captured"] = "query"
                        m["differs"] = _differing_params(url, others)
            out.append(m)
        sid = reference.get("archive_session") if isinstance(reference, dict) else None
        parted = [m for m in out if str(m.get("url") or "").startswith(("ws:", "wss:"))
                  and str(m.get("why") or "").startswith(WEBSOCKET_PARTED_WORDS)]
        absent = bool(parted) and isinstance(sid, str) and arc.session(sid) is None
    if absent and recorded_again(archive, reference) is None:
        for m in parted:
            m.update(session="absent", reference_session=sid)
    return out


def _differing_params(url: str, others: list[str]) -> list[str]:
    """The query parameters by which ``url`` differs from the captured URL nearest it (the most
    name-value pairs in common): names whose values differ, or that only one of them has, sorted
    (five at most)."""
    from urllib.parse import parse_qsl, urlsplit

    def pairs(u: str) -> set:
        return set(parse_qsl(urlsplit(u).query, keep_blank_values=True))
    mine = pairs(url)
    nearest = max(others, key=lambda u: (len(mine & pairs(u)), -len(pairs(u) ^ mine), u))
    return sorted({k for k, _ in mine ^ pairs(nearest)})[:5]


def _long_body(exchange) -> bool:
    """Whether ``exchange``'s request body is keyed by its digest alone (longer, flattened, than
    the index keeps: only an equal body matches it)."""
    from webfreeze.archives.bodykey import body_key

    try:
        key = body_key(exchange.request.header("Content-Type"), exchange.request.body())
    except Exception:
        return False
    return re.match(r"[a-z]+#sha256:", key) is not None


def _fetched_as(exchange) -> bool | None:
    """Whether an exchange's ``Sec-Fetch-Dest`` says the browser sent it as a document (a
    navigation, a frame's) or as no document (``empty``: a script's XHR or fetch, a beacon); None
    where it says nothing (a recording without the header, or another destination)."""
    dest = (exchange.request.header("Sec-Fetch-Dest") or "").lower()
    return {"document": True, "iframe": True, "frame": True, "empty": False}.get(dest)


def _placeholders(exchange) -> bool:
    """Whether ``exchange``'s request body holds a redaction placeholder (``wfredacted-...``)."""
    from webfreeze.archives.redact import PLACEHOLDER_PREFIX

    try:
        body = exchange.request.body() or b""
    except Exception:  # (a body that does not decode: no placeholder can be told in it)
        return False
    return PLACEHOLDER_PREFIX.encode() in body


def _verdict(old: dict, new: dict, moved: list[dict]) -> tuple[str, str]:
    """A task's verdict and the one line that says why; ``moved``: where its evidence now reads
    differently (:func:`evidence_moved`)."""
    # (NEW's capture incomplete too: said, since the pair says nothing else and NEW lacks it as well)
    also = f"; NEW's capture incomplete too: {_misses(new['misses'])}" if new.get("misses") else ""
    if old.get("misses"):
        return "broken", f"incomplete capture in OLD: {_misses(old['misses'])}{also}"
    if not old["reached"]:
        return "broken", f"not reached on OLD either ({_why(old)}){also}"
    if new.get("misses"):
        return "incomplete", f"incomplete capture in NEW: {_misses(new['misses'])}"
    if not new["reached"]:
        return "expired", f"changed on the site: {_why(new)}"
    if moved:
        m = moved[0]
        if not m["new"]:  # (the page is still on the path, without the fact: a line of a list gone)
            return "ambiguous", (f"still reached, but {m['url']} no longer shows {m['evidence']!r} "
                                 f"(it read {_clip(m['old'])!r})")
        return "ambiguous", (f"still reached, but around {m['evidence']!r} {m['url']} now reads "
                             f"{_clip(m['new'])!r} (was {_clip(m['old'])!r})")
    return "valid", "reached on both"


def _incomplete(suite_counts: dict) -> str:
    """", N incomplete capture" when any task's capture was incomplete (reports without any read as before)."""
    n = suite_counts.get("incomplete")
    return f", {n} incomplete capture" if n else ""


def _misses(misses: list[dict]) -> str:
    return describe_miss(misses[0]) + (f" (and {len(misses) - 1} more)" if len(misses) > 1 else "")


def _clip(texts: list[str], n: int = 80) -> str:
    text = " | ".join(texts)
    return text if len(text) <= n else text[:n - 3] + "..."


def evidence_blocks(dom: bytes, evidence: str) -> list[str]:
    """The whitespace-normalised texts of the innermost elements of a page whose text holds
    ``evidence`` (folded as the reference agent folds it), in document order; [] when none does."""
    want = fold_text(evidence)
    if not want or not dom or not dom.strip():
        return []
    try:
        root = lxml.html.document_fromstring(dom)
    except (lxml.etree.ParserError, ValueError):  # not HTML at all: nothing holds it
        return []
    for el in root.iter("script", "style", "noscript", "template"):
        el.text = ""
    def text(el) -> str:  # (a text input shows its value)
        if el.tag == "input" and (el.get("type") or "text").lower() not in UNSHOWN_INPUTS:
            return el.get("value") or ""
        return el.text_content()

    holding = [el for el in root.iter() if isinstance(el.tag, str) and want in fold_text(text(el))]
    inner = set(holding)
    for el in holding:  # keep only those with no holding descendant
        parent = el.getparent()
        while parent is not None:
            inner.discard(parent)
            parent = parent.getparent()
    return [" ".join(text(el).split()) for el in holding if el in inner]


# Ten digits or more in a row: a clock reading (epoch seconds or milliseconds, a cache buster), which
# differs between any two captures; read as one token when comparing what surrounds the evidence.
_CLOCK = re.compile(r"\d{10,}")


def _steady(text: str) -> str:
    return _CLOCK.sub("#", text)


def evidence_moved(evidence: list[str], urls: list[str], old: Mapping[str, dict],
                   new: Mapping[str, dict]) -> list[dict]:
    """For a task reached on both archives: the evidence strings whose innermost holding elements
    read differently on NEW than on OLD, on a page of the task's path that both archives hold
    (``url``, ``evidence``, ``old`` and ``new`` texts). A fact still shown, but in a changed
    sentence, row or list item (another version beside it, a count next to it), is what makes the
    ground truth questionable; a clock or a session id elsewhere on the page is not, nor a clock
    reading beside it (ten digits or more in a row)."""
    out = []
    for url in urls:
        if url not in old or url not in new:
            continue
        for e in evidence:
            a, b = evidence_blocks(old[url]["dom"], e), evidence_blocks(new[url]["dom"], e)
            if a and [_steady(x) for x in a] != [_steady(x) for x in b]:
                out.append({"url": url, "evidence": e, "old": a, "new": b})
    return out


def _why(r: dict) -> str:
    if r.get("reason"):
        return r["reason"]
    return f"ended by {r['end']}; " + ("no answer" if r["answer"] is None else f"answer {r['answer']!r}")


def evidence_gone(evidence: list[str], urls: list[str], old: Snapshot, new: Snapshot) -> list[str]:
    """The answers whose evidence is gone: the evidence strings that some page of ``urls`` (the
    task's path on OLD; every page when it is empty) shows on OLD and none of those pages shows on
    NEW (a page NEW lacks shows nothing). The same fact shown elsewhere on NEW does not count:
    the task's path no longer leads to it."""
    gone = []
    pool = [u for u in urls if u in old] or sorted(old)
    for e in evidence:
        f = fold_text(e)
        where = [u for u in pool if f and f in old.folded_text(u)]
        if where and not any(f in new.folded_text(u) for u in where):
            gone.append(e)
    return gone


def _select(loaded, globs, limit) -> list:
    tasks = [t for t in loaded.tasks if not globs or any(fnmatch.fnmatchcase(t.id, g) for g in globs)]
    return tasks[:limit] if limit else tasks


# ------------------------------------------------------------------------------------------ drift
def drift(old: str | os.PathLike, new: str | os.PathLike, *, suite=None, backend: str | None = None,
          workers: int = 1, tasks=(), limit: int | None = None, report_dir=None, progress=None) -> dict:
    """Compare two archives (and, with ``suite``, its tasks on both); returns the report and, with
    ``report_dir``, writes it there. ``progress(what, done, total)`` reports long work."""
    old, new = Path(old), Path(new)
    for p in (old, new):
        if not p.is_file():
            raise DriftError(f"{p}: no such archive")
    out = _report_dir(Path(report_dir), (old, new)) if report_dir is not None else None
    loaded = None
    if suite is not None:
        loaded = load_suite(suite)
        selected = _select(loaded, tasks, limit)
        if not selected:
            raise DriftError(f"{suite}: no task of the suite matches --tasks")
        no_ref = [t.id for t in selected if t.reference is None]
        if no_ref:
            raise DriftError(f"{len(no_ref)} task(s) have no reference trajectory to replay, e.g. {no_ref[0]}")
        backend = backend or getattr(loaded, "backend", None) or DEFAULT_BACKEND
    tick = progress or (lambda what, done, total: None)
    results = {}
    if loaded is not None:
        ids = [t.id for t in selected]
        for side, path in (("old", old), ("new", new)):
            done = [0]

            def step(summary, side=side, done=done):
                done[0] += 1
                tick(f"reference on {side.upper()} ({backend})", done[0], len(ids))
            results[side] = validate_references(suite, path, backend=backend, workers=workers,
                                                tasks=[glob.escape(i) for i in ids], progress=step)
    with Archive.open(old) as arc_old, Archive.open(new) as arc_new:
        snap_old, snap_new = Snapshot(arc_old), Snapshot(arc_new)
        # Like with like: a page record is the page as its scripts drew it, an HTML document the page
        # as served; when one side has no page records (a recorded session's archive), both sides
        # offer their HTML documents, else every page a script draws would count as changed.
        if snap_old.source != snap_new.source:
            snap_old, snap_new = Snapshot(arc_old, responses=True), Snapshot(arc_new, responses=True)
        if not snap_old and not snap_new:
            raise DriftError(f"{old.name} and {new.name} hold no pages to compare (no page records, "
                             "no HTML documents)")
        total = len(set(snap_old) | set(snap_new))
        rows = compare_pages(snap_old, snap_new, lambda n: tick("comparing pages", n, total))
        counts = {s: sum(1 for r in rows if r["status"] == s) for s in ("same", "changed", "added", "removed")}
        both = [r for r in rows if r["status"] in ("same", "changed")]
        sims = [r["text_similarity"] for r in both]
        diffs = [r["pixel_difference"] for r in both if r["pixel_difference"] is not None]
        report = {
            "format": REPORT_FORMAT, "version": REPORT_VERSION,
            "old": {"archive": old.name, "digest": archive_digest(old), "pages": len(snap_old),
                    "pages_from": snap_old.source},
            "new": {"archive": new.name, "digest": archive_digest(new), "pages": len(snap_new),
                    "pages_from": snap_new.source},
            "summary": {"pages": len(rows), **counts,
                        "text_changed": sum(1 for r in both if r["text_changed"]),
                        "numbers_only": sum(1 for r in both if r["numbers_only"]),
                        "mean_text_similarity": round(sum(sims) / len(sims), 4) if sims else None,
                        "min_text_similarity": min(sims) if sims else None,
                        "mean_pixel_difference": round(sum(diffs) / len(diffs), 6) if diffs else None,
                        "max_pixel_difference": max(diffs) if diffs else None},
            "pages": rows,
        }
        if loaded is not None:
            task_rows = []
            for t in selected:
                a, b = results["old"].get(t.id), results["new"].get(t.id)
                if a is None or b is None:  # not played (cannot happen for a selected task): say so, not crash
                    raise DriftError(f"task {t.id}: the reference run did not play it")
                evidence = answer_evidence(t.reference)
                moved = evidence_moved(evidence, b["visited"], snap_old, snap_new) \
                    if a["reached"] and b["reached"] else []
                verdict, why = _verdict(a, b, moved)
                task_rows.append({"task_id": t.id, "category": t.category, "verdict": verdict, "why": why,
                                  "old": a, "new": b, "evidence_moved": moved,
                                  "evidence_gone": evidence_gone(evidence, a["visited"], snap_old, snap_new)})
            report["suite"] = {"name": loaded.name, "tasks": len(task_rows), "backend": backend,
                               **{v: sum(1 for r in task_rows if r["verdict"] == v) for v in VERDICTS},
                               "evidence_gone": sum(1 for r in task_rows if r["evidence_gone"])}
            report["tasks"] = task_rows
        if out is not None:
            write_report(report, out, (old, new), snap_old, snap_new)
    return report


# ----------------------------------------------------------------------------------------- report
def _report_dir(out: Path, archives) -> Path:
    """The report folder, resolved; refused when replacing it would delete anything but an earlier
    drift report, or when an archive being compared lies inside it."""
    out = out.resolve()
    if out.exists():
        if not out.is_dir():
            raise DriftError(f"{out}: exists and is not a directory; choose a new --report directory")
        if any(out.iterdir()) and not _holds_report(out):
            raise DriftError(f"{out}: exists, is not empty and holds no drift report; "
                             "choose an empty or new --report directory")
    for a in archives:
        if out == Path(out.anchor) or out in Path(a).resolve().parents:
            raise DriftError(f"{out}: {Path(a).name} is inside it; choose another --report directory")
    return out


def _holds_report(path: Path) -> bool:
    try:
        return json.loads((path / "report.json").read_text(encoding="utf-8")).get("format") == REPORT_FORMAT
    except (OSError, ValueError, AttributeError):
        return False


def write_report(report: dict, out: Path, archives, snaps_old: Mapping[str, dict],
                 snaps_new: Mapping[str, dict]) -> None:
    """Write ``report.json``, ``report.md``, ``report.html`` and the screenshots of the changed
    pages (``pages/NNNN.old.EXT``, ``.new.EXT``) into ``out``, all or nothing."""
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        partial = Path(tempfile.mkdtemp(prefix=f".{out.name}.partial-", dir=out.parent))
    except OSError as exc:
        raise DriftError(f"{out}: cannot write the report ({exc.strerror or exc})") from None
    try:
        shots: dict[str, dict] = {}
        for n, row in enumerate(report["pages"], 1):
            if row["status"] != "changed":
                continue
            for side, snaps in (("old", snaps_old), ("new", snaps_new)):
                data = snaps[row["url"]]["shot"]
                if data:
                    name = f"pages/{n:04d}.{side}.{image_ext(data)}"
                    (partial / "pages").mkdir(exist_ok=True)
                    (partial / name).write_bytes(data)
                    shots.setdefault(row["url"], {})[side] = name
        (partial / "report.json").write_text(json_text(report), encoding="utf-8")
        (partial / "report.md").write_text(render_markdown(report), encoding="utf-8")
        (partial / "report.html").write_text(render_html(report, shots), encoding="utf-8")
        os.chmod(partial, 0o755)
        if out.exists():
            _report_dir(out, archives)  # again: something may have been put there meanwhile
            shutil.rmtree(out)
        partial.rename(out)
    except OSError as exc:
        shutil.rmtree(partial, ignore_errors=True)
        raise DriftError(f"{out}: cannot write the report ({exc.strerror or exc})") from None
    except BaseException:
        shutil.rmtree(partial, ignore_errors=True)
        raise


def _num(v, fmt: str, identical: float | None = None) -> str:
    """``v`` formatted, ``-`` for None; a value other than ``identical`` (1.0 for a similarity, 0.0
    for a difference) that would be written as it reads as a bound instead: '>0.999', '<0.0001'."""
    if v is None:
        return "-"
    text = format(v, fmt)
    if identical is not None and v != identical and text == format(identical, fmt):
        step = 10.0 ** -int(fmt.strip(".f"))
        return f">{identical - step:{fmt}}" if v < identical else f"<{identical + step:{fmt}}"
    return text


def _status(row: dict) -> str:
    """A page's status as the tables print it: a change of numbers alone said so."""
    return "changed (numbers only)" if row.get("numbers_only") else row["status"]


def _numbers(summary: dict) -> str:
    n = summary.get("numbers_only") or 0
    return f", {n} of them only in numbers" if n else ""


def _md(text) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def render_markdown(report: dict) -> str:
    """The report as Markdown: the summary, the pages that changed, were added or removed, and the
    tasks with their verdicts."""
    s, o, n = report["summary"], report["old"], report["new"]
    lines = [f"# Drift: {o['archive']} -> {n['archive']}", "",
             f"- OLD: `{o['archive']}` ({o['digest']}), {o['pages']} pages",
             f"- NEW: `{n['archive']}` ({n['digest']}), {n['pages']} pages",
             (f"- pages: {s['same']} same, {s['changed']} changed ({s['text_changed']} in their text"
              f"{_numbers(s)}), "
              f"{s['added']} added, {s['removed']} removed"),
             (f"- text similarity: mean {_num(s['mean_text_similarity'], '.4f', 1.0)}, "
              f"min {_num(s['min_text_similarity'], '.4f', 1.0)}; pixel difference: mean "
              f"{_num(s['mean_pixel_difference'], '.6f', 0.0)}, max {_num(s['max_pixel_difference'], '.6f', 0.0)}"), ""]
    moved = [r for r in report["pages"] if r["status"] != "same"]
    lines += ["## Pages", ""]
    if moved:
        lines += ["| page | status | text similarity | pixel difference |", "|---|---|---|---|"]
        lines += [f"| {_md(r['url'])} | {_status(r)} | {_num(r['text_similarity'], '.4f', 1.0)} | "
                  f"{_num(r['pixel_difference'], '.6f', 0.0)} |" for r in moved]
    else:
        lines.append("No page changed, was added or removed.")
    if "suite" in report:
        su = report["suite"]
        lines += ["", f"## Tasks of {su['name']} ({su['backend']} backend)", "",
                  (f"{su['valid']} valid, {su['ambiguous']} ambiguous, {su['expired']} expired, "
                   f"{su['broken']} broken{_incomplete(su)}; {su['evidence_gone']} with answer evidence gone"), "",
                  "| task | verdict | why | evidence gone |", "|---|---|---|---|"]
        lines += [f"| {_md(t['task_id'])} | {t['verdict']} | {_md(t['why'])} | "
                  f"{_md('; '.join(t['evidence_gone']) or '-')} |" for t in report["tasks"]]
    return "\n".join(lines) + "\n"


def render_html(report: dict, shots: dict | None = None) -> str:
    """The report as one HTML page; ``shots``: URL -> {old, new} screenshot paths in the report."""
    e = htmlmod.escape
    shots = shots or {}
    s, o, n = report["summary"], report["old"], report["new"]
    summary = "".join(f"<tr><th>{e(k.replace('_', ' '))}</th><td>{e(str(v))}</td></tr>" for k, v in s.items())
    rows = []
    for r in report["pages"]:
        figs = "".join(f'<figure><img loading="lazy" src="{e(src)}" alt="{side}"><figcaption>{side}</figcaption>'
                       f"</figure>" for side, src in sorted((shots.get(r["url"]) or {}).items(), reverse=True))
        rows.append(f'<tr class="{e(r["status"])}"><td>{e(r["url"])}<br><small>{e(r["title"])}</small></td>'
                    f'<td>{e(_status(r))}</td><td>{_num(r["text_similarity"], ".4f", 1.0)}</td>'
                    f'<td>{_num(r["pixel_difference"], ".6f", 0.0)}</td><td class="shots">{figs}</td></tr>')
    tasks = ""
    if "suite" in report:
        su = report["suite"]
        trs = "".join(f'<tr class="{e(t["verdict"])}"><td>{e(t["task_id"])}</td><td>{e(t["verdict"])}</td>'
                      f'<td>{e(t["why"])}</td><td>{e("; ".join(t["evidence_gone"]) or "-")}</td></tr>'
                      for t in report["tasks"])
        tasks = (f"<h2>Tasks of {e(su['name'])} ({e(su['backend'])} backend)</h2>"
                 f"<p>{su['valid']} valid, {su['ambiguous']} ambiguous, {su['expired']} expired, {su['broken']} "
                 f"broken{_incomplete(su)}; {su['evidence_gone']} with answer evidence gone</p>"
                 f"<table><tr><th>task</th><th>verdict</th><th>why</th><th>evidence gone</th></tr>{trs}</table>")
    title = f"Drift: {e(o['archive'])} -> {e(n['archive'])}"
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{title}</title>
<style>
body{{font:14px/1.4 system-ui,sans-serif;margin:2em}} table{{border-collapse:collapse;margin-bottom:1em}}
td,th{{border:1px solid #ccc;padding:4px 8px;vertical-align:top;text-align:left}}
tr.changed td:first-child,tr.ambiguous td:first-child{{border-left:4px solid #d80}}
tr.removed td:first-child,tr.expired td:first-child,tr.incomplete td:first-child{{border-left:4px solid #c00}}
tr.added td:first-child{{border-left:4px solid #06c}} tr.same td:first-child,tr.valid td:first-child{{border-left:4px solid #2a2}}
.shots{{display:flex;gap:8px}} figure{{margin:0}} img{{width:240px;border:1px solid #999}}
</style></head><body>
<h1>{title}</h1>
<p>OLD {e(o['archive'])} ({e(o['digest'])}), NEW {e(n['archive'])} ({e(n['digest'])})</p>
<table class="summary">{summary}</table>
<h2>Pages</h2>
<table class="pages"><tr><th>page</th><th>status</th><th>text similarity</th><th>pixel difference</th><th>screenshots</th></tr>
{"".join(rows)}
</table>
{tasks}
</body></html>
"""


# ---------------------------------------------------------------------------- the tables on stdout
def print_tables(report: dict) -> None:
    """The short tables on stdout: pages that moved, then the tasks (all of them, with their verdict).
    Below them, the command prints :func:`summary_line`."""
    console = Console()
    console = console if console.is_terminal else Console(width=140)
    moved = [r for r in report["pages"] if r["status"] != "same"]
    if moved:
        t = Table(title="pages", title_justify="left")
        for col in ("page", "status", "text sim.", "pixel diff."):
            t.add_column(col, overflow="fold")
        for r in moved:
            t.add_row(r["url"], _status(r), _num(r["text_similarity"], ".3f", 1.0), _num(r["pixel_difference"], ".4f", 0.0))
        console.print(t)
    if "tasks" in report:
        t = Table(title="tasks", title_justify="left")
        for col in ("task", "verdict", "why"):
            t.add_column(col, overflow="fold")
        for r in report["tasks"]:
            t.add_row(r["task_id"], r["verdict"], r["why"])
        console.print(t)


def summary_line(report: dict) -> str:
    """The report in one line: pages same, changed, added and removed; tasks by verdict."""
    s = report["summary"]
    n = s.get("numbers_only") or 0
    line = (f"{s['pages']} pages: {s['same']} same, {s['changed']} changed"
            f"{f' ({n} only in numbers)' if n else ''}, {s['added']} added, {s['removed']} removed")
    if "suite" in report:
        su = report["suite"]
        line += (f"; {su['tasks']} tasks: {su['valid']} valid, {su['ambiguous']} ambiguous, "
                 f"{su['expired']} expired, {su['broken']} broken")
        line += _incomplete(su)
    return line
