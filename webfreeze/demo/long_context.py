"""The long-context suite: pairs of sequentially dependent subtasks A1 -> A2 on the demo archive
(the long-context WebAgents paper's split). Build it with ``python -m webfreeze.demo.long_context [OUT]``
(default: ``data/long-context``).

A2 is under-specified ("that paper", "that product", "that doctor"): it names its item only
through A1's outcome, and carries ``depends_on`` = A1's id. Every page both need is already in the
demo archive (the demo suite's recorded sessions visited them; the builder checks), so no
recording is needed: A1 reuses a demo task's recorded steps, and A2's reference trajectory is
written from the sites' data, as ``personas tasks`` writes its own (open the item's page, act,
answer with the evidence the page must show). Ground truth comes from the sites' catalogues
(:mod:`webfreeze.simulator.sites`), never from a recording.

Each A2 also lists, under ``context_exclude``, the demo tasks about the same item: a filler pool
made on the demo suite must not hand the agent the answer as "irrelevant" noise.
"""

from __future__ import annotations

import copy
import json
import shutil
import sys
import tempfile
from pathlib import Path

from webfreeze.common.errors import WebfreezeError

from .tasks import SEED, all_specs

DATA = Path(__file__).resolve().parent / "data"
OUT = DATA / "long-context"
DEMO_SUITE = DATA / "suite"
SUITE_NAME = "webfreeze-long-context"
CATEGORIES = ["subtask-a1", "subtask-a2"]
SITE_MODELS = {"shop.test": "shop", "booking.test": "booking"}


class LongContextBuildError(WebfreezeError, RuntimeError):
    """The suite cannot be built (a page missing from the archive): one line."""


def _step(n: int, action: str, url: str, role: str | None = None, name: str | None = None, value=None) -> dict:
    target = {"role": role, "name": name, "css": None, "tag": None, "text": ""} if role else None
    return {"step": n, "action": action, "target": target, "value": value, "url": url}


def _reference(start: str, page: str, actions: list[tuple], answer: str, evidence: list[str]) -> dict:
    """A ``record session``-shaped reference: start, open ``page`` (the item A1 found), act, answer.
    The second navigate becomes ``goto(page)`` for the reference agent when the episode starts
    elsewhere (e.g. where an injected trajectory ended)."""
    steps = [_step(0, "navigate", start), _step(1, "navigate", page)]
    for action, role, name, value in actions:
        steps.append(_step(len(steps), action, page, role, name, value))
    steps.append(_step(len(steps), "answer", page, value={"text": answer, "evidence": evidence}))
    return {"version": 1, "kind": "reference_trajectory", "start_url": start,
            "recorded_by": "webfreeze.demo.long_context", "steps": steps}


def _demo_reference(task_id: str) -> dict:
    return json.loads((DEMO_SUITE / "references" / f"{task_id}.json").read_text(encoding="utf-8"))


def _until(reference: dict, url: str, answer: str, evidence: list[str]) -> dict:
    """A demo reference cut after it reaches ``url``, ending with a new answer."""
    ref = copy.deepcopy(reference)
    steps = []
    for s in ref["steps"]:
        if s["action"] == "answer":
            break
        steps.append(s)
        if s["action"] == "navigate" and s.get("url") == url:
            break
    steps.append(_step(len(steps), "answer", url, value={"text": answer, "evidence": evidence}))
    ref["steps"] = steps
    ref["recorded_by"] = f"{ref.get('recorded_by') or 'record session'} (cut by webfreeze.demo.long_context)"
    return ref


def _related(specs, *keys: str) -> list[str]:
    """Demo tasks whose instruction, steps or ground truth mention any of ``keys``."""
    out = []
    for s in specs:
        text = json.dumps([s.instruction, s.steps, s.ground_truth], default=str)
        if any(k in text for k in keys):
            out.append(s.id)
    return out


def build_tasks() -> tuple[list[dict], dict]:
    """(the suite's task lines, {reference path: reference}) from the sites' data."""
    from webfreeze.simulator.sites.booking import build_venues
    from webfreeze.simulator.sites.scholar_data import build_corpus
    from webfreeze.simulator.sites.shop import build_catalogue

    specs = all_specs()
    by_spec = {s.id: s for s in specs}
    papers = {p.id: p for p in build_corpus(SEED).papers}
    products = {p.sku: p for p in build_catalogue(SEED)}
    venues = {v.id: v for v in build_venues(SEED)}
    tasks: list[dict] = []
    refs: dict[str, dict] = {}

    def add(tid: str, category: str, instruction: str, start: str, truth: dict, ref: dict, **extra) -> None:
        path = f"references/{tid}.json"
        refs[path] = ref
        tasks.append({"id": tid, "category": category, "instruction": instruction, "start_url": start,
                      "snapshot_time": None, "ground_truth": {**truth, "reference_trajectory": path}, **extra})

    scholar = "http://scholar.test/"

    def paper_a1(n: int, demo_id: str) -> str:
        spec = by_spec[demo_id]
        pid = spec.ground_truth["answer"]["exact"]
        add(f"lc-{n:02d}-a1", "subtask-a1", spec.instruction, spec.start_url, {"answer": {"exact": pid}},
            _demo_reference(demo_id))
        return pid

    # 1. A1 finds a paper by its title; A2 asks for its page count (comments on its abstract page)
    pid = paper_a1(1, "scholar-paper-retrieval-001")
    p = papers[pid]
    pages = int(p.comments.split()[0])
    add("lc-01-a2", "subtask-a2", "According to its comments, how many pages does the paper you identified in the "
        "previous task have? Answer with a number.", scholar, {"answer": {"numeric": pages}},
        _reference(scholar, f"{scholar}abs/{pid}", [], str(pages), [p.comments]),
        depends_on="lc-01-a1", context_exclude=_related(specs, pid, p.title))

    # 2. A1 finds a paper by its title; A2 asks how large its first version was
    pid = paper_a1(2, "scholar-paper-retrieval-002")
    p = papers[pid]
    v1 = p.versions[0]
    add("lc-02-a2", "subtask-a2", "How large, in KB, was version 1 of the paper you identified in the previous "
        "task?", scholar, {"answer": {"numeric": v1.size_kb}},
        _reference(scholar, f"{scholar}abs/{pid}", [], str(v1.size_kb), [f"({v1.size_kb} KB)"]),
        depends_on="lc-02-a1", context_exclude=_related(specs, pid, p.title))

    # 3. A1 compares two papers' submission dates; A2 asks for the earlier one's first author
    pid = paper_a1(3, "scholar-cross-paper-001")
    p = papers[pid]
    other = [w for w in by_spec["scholar-cross-paper-001"].instruction.split() if w[:4].isdigit() and w != pid][0]
    add("lc-03-a2", "subtask-a2", "Who is the first author of the paper you found to be submitted earlier in the "
        "previous task? Give the person's name.", scholar, {"answer": {"normalised": p.authors[0]}},
        _reference(scholar, f"{scholar}abs/{pid}", [], p.authors[0], [p.authors[0]]),
        depends_on="lc-03-a1", context_exclude=_related(specs, pid, other, p.title))

    # 4. A1 finds a product and its price; A2 puts "that product" in the cart
    spec = by_spec["shop-001"]
    item = next(c["contains"] for c in spec.ground_truth["final_state"] if "contains" in c)
    prod = products[item["sku"]]
    page = f"http://shop.test/p/{prod.sku}"
    price = f"{prod.price:.2f}"
    add("lc-04-a1", "subtask-a1", f"On the shop, find the {prod.name}. What is its price in dollars? Answer with a "
        "number.", spec.start_url, {"answer": {"numeric": prod.price, "tolerance": 0.005}},
        _until(_demo_reference("shop-001"), page, price, [f"${price}"]))
    acts = ([("select", "combobox", "Size", {"value": item["size"], "label": item["size"]})] if len(prod.sizes) > 1
            else []) + ([("type", "spinbutton", "Quantity", str(item["qty"]))] if item["qty"] != 1 else []) \
        + [("click", "button", "Add to cart", None)]
    add("lc-04-a2", "subtask-a2", f"Add {item['qty']} of the product you looked up in the previous task, in size "
        f"{item['size']}, to the shopping cart.", "http://shop.test/",
        {"final_state": copy.deepcopy(spec.ground_truth["final_state"])},
        _reference("http://shop.test/", page, acts, "Done", []),
        depends_on="lc-04-a1", context_exclude=_related(specs, prod.sku, prod.name))

    # 5. A1 finds a doctor's address; A2 books "that doctor"
    spec = by_spec["booking-001"]
    booked = next(c["contains"] for c in spec.ground_truth["final_state"] if "contains" in c)
    v = venues[booked["venue"]]
    page = f"http://booking.test/venue/{v.id}"
    add("lc-05-a1", "subtask-a1", f"On the booking site, find {v.name} in {v.city}. What is the address of the "
        "practice?", spec.start_url, {"answer": {"normalised": v.address}},
        _until(_demo_reference("booking-001"), page, v.address, [v.address]))
    name = "Sam Context"
    add("lc-05-a2", "subtask-a2", f"Book an appointment with the doctor you looked up in the previous task at "
        f"{booked['slot']}, under the name {name}.", "http://booking.test/",
        {"final_state": [{"host": "booking.test", "path": "reservations", "count": 1},
                         {"host": "booking.test", "path": "reservations",
                          "contains": {"venue": v.id, "slot": booked["slot"], "name": name, "party": 1}}]},
        _reference("http://booking.test/", page, [("select", "combobox", "Time", {"value": booked["slot"],
                                                                                    "label": booked["slot"]}),
                                                   ("type", "textbox", "Name", name),
                                                   ("click", "button", "Reserve", None)], "Done", []),
        depends_on="lc-05-a1", context_exclude=_related(specs, v.id, v.name))
    return tasks, refs


def _needed_urls(tasks: list[dict], refs: dict) -> list[str]:
    urls = []
    for t in tasks:
        urls.append(t["start_url"])
        for s in refs[t["ground_truth"]["reference_trajectory"]]["steps"]:
            if s["action"] == "navigate" and s["url"] not in urls:
                urls.append(s["url"])
    return list(dict.fromkeys(urls))


def build(out: Path = OUT, archive: Path = DATA / "demo.wfz") -> dict:
    """Write the suite folder ``out`` (manifest.json, tasks.jsonl, references/), replacing it only
    once complete. Every page a reference opens must be in ``archive`` (the demo archive)."""
    from webfreeze.archives import Archive, archive_digest
    from webfreeze.archives.urlkey import surt_key

    tasks, refs = build_tasks()
    a = Archive.open(archive)
    try:
        missing = [u for u in _needed_urls(tasks, refs) if not a.lookup_surt(surt_key(u), limit=1)]
    finally:
        a.close()
    if missing:
        raise LongContextBuildError(f"{archive}: {len(missing)} page(s) the suite needs are not recorded, e.g. "
                                    f"{missing[0]}")
    out = Path(out)
    work = Path(tempfile.mkdtemp(prefix="long-context-", dir=out.parent))
    try:
        (work / "references").mkdir()
        for path, ref in refs.items():
            (work / path).write_text(json.dumps(ref, indent=1, sort_keys=True, ensure_ascii=False) + "\n",
                                     encoding="utf-8")
        (work / "tasks.jsonl").write_text("".join(json.dumps(t, sort_keys=True, ensure_ascii=False) + "\n"
                                                  for t in tasks), encoding="utf-8")
        manifest = {"format": "webfreeze-suite", "version": 1, "name": SUITE_NAME,
                    "description": "Sequentially dependent subtasks A1 -> A2 (the long-context WebAgents paper) on "
                                   "the demo archive; A2 names its item only through A1's outcome.",
                    "archive": "../demo.wfz", "archive_digest": archive_digest(archive), "categories": CATEGORIES,
                    "site_models": SITE_MODELS, "tasks": "tasks.jsonl"}
        (work / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
        if out.exists():
            shutil.rmtree(out)
        work.rename(out)
        return manifest
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    out = Path(argv[0]) if argv else OUT
    try:
        manifest = build(out)
    except LongContextBuildError as exc:
        sys.exit(f"error: {exc}")
    print(f"long-context suite written to {out} (archive {manifest['archive_digest']})")


if __name__ == "__main__":
    main()
