"""Build the demo archive and suite: ``python -m webfreeze.demo.build [OUT_DIR]``.

The simulated scholar, shop and booking sites are served on loopback under the names
``scholar.test``, ``shop.test`` and ``booking.test`` (the recorder's ``resolve`` table), crawled
by our recorder, and every task of :mod:`webfreeze.demo.tasks` is performed once in Chromium
through ``record session``: the logged session is the task's reference trajectory, and the pages
it touched land in the archive. Then the persona sites' pages (the start page, the second shop,
the restaurant, hotel and clinic sites: :mod:`webfreeze.demo.persona_sites`) are added. The
output (shipped in ``webfreeze/demo/data``) is:

- ``demo.wfz`` the archive (packed for sharing);
- ``suite/manifest.json``, ``suite/tasks.jsonl`` and ``suite/references/<task>.json``.

Developers rebuild it when the sites or tasks change; users never need to (it needs no network,
but takes a few minutes).

``python -m webfreeze.demo.build --ground-truth`` only rewrites the ground truth of the shipped
suite's ``tasks.jsonl`` from :mod:`webfreeze.demo.tasks` (nothing is recorded: the archive, the
references, the instructions and the LLM cassette stay as they are; it refuses when a task's id,
category, instruction or start URL differs from its spec, which needs a full rebuild).

``python -m webfreeze.demo.build --add-sites`` only adds the persona sites' pages to the shipped
archive (the existing records, the suite and the LLM cassette stay valid: see
:func:`webfreeze.demo.persona_sites.add_records`) and updates the suite's archive digest.
"""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
from pathlib import Path

from webfreeze.archives import archive_digest
from webfreeze.common.files import write_atomically

from .tasks import CATEGORIES, HOSTS, Spec, all_specs

DATA = Path(__file__).resolve().parent / "data"
SUITE_NAME = "webfreeze-demo"
SITE_MODELS = {"shop.test": "shop", "booking.test": "booking"}
CRAWL = {"scholar": (1, 10), "shop": (1, 5), "booking": (1, 4)}  # depth, max pages


def _locator(page, role: str, name: str, nth: int = 0):
    exact = page.get_by_role(role, name=name, exact=True)
    if exact.count() > nth:
        return exact.nth(nth)
    return page.get_by_role(role, name=name).nth(nth)  # e.g. a link whose image repeats its text


def _perform(page, step: tuple) -> None:
    from webfreeze.recorder.session import record_answer

    kind = step[0]
    if kind == "click":
        _locator(page, step[1], step[2], *step[3:]).click()
        page.wait_for_load_state("load")
    elif kind == "fill":
        _locator(page, step[1], step[2], *step[4:]).fill(step[3])
    elif kind == "select":
        _locator(page, step[1], step[2], *step[4:]).select_option(label=step[3])
    elif kind == "press":
        _locator(page, step[1], step[2]).press(step[3])
        page.wait_for_load_state("load")
    elif kind == "answer":
        _, text, where, evidence = step
        loc = None
        if isinstance(where, tuple):
            loc = _locator(page, *where)
        elif isinstance(where, str):
            loc = page.locator(where).first
        record_answer(page, text, loc, evidence)
    else:
        raise ValueError(f"unknown step {kind!r}")


def make_driver(spec: Spec):
    """A ``run(page)`` performing the spec's steps as a person would."""

    def run(page) -> None:
        page.set_default_timeout(10_000)
        for step in spec.steps:
            try:
                _perform(page, step)
            except Exception as exc:
                raise RuntimeError(f"{spec.id}: step {step!r} failed on {page.url}: "
                                   f"{str(exc).splitlines()[0]}") from None
            page.wait_for_timeout(50)  # let the page's listener report the step before the next one

    return run


def build(out: Path, *, only: list[str] | None = None, progress=print) -> dict:
    from webfreeze.recorder.crawl import crawl
    from webfreeze.recorder.session import record_session
    from webfreeze.simulator.sites import serve

    specs = [s for s in all_specs() if not only or s.id in only]
    out = Path(out)
    work = Path(tempfile.mkdtemp(prefix="demo-build-", dir=out.parent if out.parent.exists() else None))
    servers = {name: serve(name) for name in HOSTS}
    try:
        resolve = {HOSTS[name]: ("127.0.0.1", srv.port) for name, srv in servers.items()}
        raw = work / "raw.wfz"
        for name, (depth, pages) in CRAWL.items():
            progress(f"crawl http://{HOSTS[name]}/ (depth {depth}, at most {pages} pages)")
            crawl(raw, f"http://{HOSTS[name]}/", depth=depth, max_pages=pages, resolve=resolve)
        suite = work / "suite"
        (suite / "references").mkdir(parents=True)
        lines = []
        for i, spec in enumerate(specs, start=1):
            progress(f"[{i}/{len(specs)}] record session {spec.id}")
            path = suite / "references" / f"{spec.id}.json"
            trajectory = record_session(raw, spec.start_url, path, driver=make_driver(spec), resolve=resolve)
            actions = [s["action"] for s in trajectory["steps"]]
            if actions.count("answer") != 1 or actions[-1] != "answer":
                raise RuntimeError(f"{spec.id}: the recorded session does not end with its answer: {actions}")
            task = spec.task()
            task["ground_truth"]["reference_trajectory"] = f"references/{spec.id}.json"
            lines.append(json.dumps(task, ensure_ascii=False, sort_keys=True))
        from .persona_sites import record_persona_sites

        record_persona_sites(raw, resolve=resolve, work=work, progress=progress)
        packed = work / "demo.wfz"
        progress("pack the archive")
        from webfreeze.archives.maintenance import pack

        pack(raw, packed)
        manifest = {"format": "webfreeze-suite", "version": 1, "name": SUITE_NAME,
                    "description": "Tasks on the simulated scholar, shop and booking sites, recorded by webfreeze.",
                    "archive": "../demo.wfz", "archive_digest": archive_digest(packed),
                    "categories": [c for c in CATEGORIES if any(s.category == c for s in specs)],
                    "site_models": SITE_MODELS, "tasks": "tasks.jsonl"}
        (suite / "tasks.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
        (suite / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
        final = work / "final"
        final.mkdir()
        shutil.move(str(packed), final / "demo.wfz")
        shutil.move(str(suite), final / "suite")
        if out.exists():
            shutil.rmtree(out)
        shutil.move(str(final), out)
        return manifest
    finally:
        for srv in servers.values():
            srv.stop()
        shutil.rmtree(work, ignore_errors=True)


def add_sites(data: Path = DATA, *, progress=print) -> dict:
    """Add the persona sites' pages to ``data``'s archive (nothing else in it changes) and set the
    suite manifest's archive digest; the archive is replaced only once the new one is complete."""
    from webfreeze.archives.maintenance import pack
    from webfreeze.simulator.sites import serve

    from .persona_sites import record_persona_sites

    archive, manifest_path = data / "demo.wfz", data / "suite" / "manifest.json"
    work = Path(tempfile.mkdtemp(prefix="demo-sites-", dir=data))  # same file system: replace() is atomic
    servers = {name: serve(name) for name in HOSTS}
    try:
        resolve = {HOSTS[name]: ("127.0.0.1", srv.port) for name, srv in servers.items()}
        raw = work / "raw.wfz"
        shutil.copyfile(archive, raw)
        counts = record_persona_sites(raw, resolve=resolve, work=work, progress=progress)
        if not counts["pages"]:  # nothing added: the shipped archive stays byte for byte
            return {**counts, "archive_digest": archive_digest(archive)}
        progress("pack the archive")
        pack(raw, work / "demo.wfz")
        manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
        manifest["archive_digest"] = archive_digest(work / "demo.wfz")
        (work / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
        (work / "demo.wfz").replace(archive)
        (work / "manifest.json").replace(manifest_path)
        return {**counts, "archive_digest": manifest["archive_digest"]}
    finally:
        for srv in servers.values():
            srv.stop()
        shutil.rmtree(work, ignore_errors=True)


def update_ground_truth(data: Path = DATA) -> int:
    """Rewrite the ground truth of ``data``'s suite from the task specs, keeping every other field
    and the line order; returns how many lines changed. Raises RuntimeError when the suite and
    the specs disagree on anything but ground truth."""
    path = data / "suite" / "tasks.jsonl"
    specs = {s.id: s for s in all_specs()}
    lines = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    out, changed = [], 0
    for task in lines:
        spec = specs.get(task["id"])
        if spec is None:
            raise RuntimeError(f"{path}: task {task['id']} has no spec in webfreeze.demo.tasks")
        want = spec.task()
        for key in ("category", "instruction", "start_url", "snapshot_time"):
            if task.get(key) != want[key]:
                raise RuntimeError(f"{path}: task {task['id']}: {key} differs from its spec (rebuild the demo)")
        truth = dict(want["ground_truth"])
        if "reference_trajectory" in task["ground_truth"]:
            truth["reference_trajectory"] = task["ground_truth"]["reference_trajectory"]
        if truth != task["ground_truth"]:
            changed += 1
        out.append(json.dumps({**task, "ground_truth": truth}, ensure_ascii=False, sort_keys=True))
    write_atomically(path, "\n".join(out) + "\n")
    return changed


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--ground-truth"]:
        n = update_ground_truth(Path(argv[1]) if len(argv) > 1 else DATA)
        print(f"ground truth updated: {n} task(s) changed")
        return
    if argv[:1] == ["--add-sites"]:
        result = add_sites(Path(argv[1]) if len(argv) > 1 else DATA)
        done = "persona sites added" if result["pages"] else "nothing to add"
        print(f"{done}: archive {result['archive_digest']}")
        return
    out = Path(argv[0]) if argv else DATA
    only = argv[1:] or None
    manifest = build(out, only=only)
    print(f"demo built in {out}: archive {manifest['archive_digest']}")


if __name__ == "__main__":
    main()
