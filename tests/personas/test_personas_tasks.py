"""Personalised task suites: ground truth against the catalogues and the sites' own state, the
levels' wording, ranking tasks, the --archive filter and the CLI's errors."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from cli_runner import invoke

from webfreeze.personas.catalogue import load_catalogue
from webfreeze.personas.generate import generate, tier_words
from webfreeze.personas.tasks import build_suite

SEED = 21


@pytest.fixture(scope="module")
def persona_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("personas") / "p"
    generate(out, n=4, seed=SEED)
    return out


@pytest.fixture(scope="module")
def suite(persona_dir, tmp_path_factory):
    out = tmp_path_factory.mktemp("suite") / "s"
    r = invoke("personas", "tasks", "--personas", persona_dir, "--out", out, "--per-persona", "4")
    assert r.returncode == 0, r.stderr
    assert "wrote 56 tasks (48 personalised, 8 ranking)" in r.stdout
    return out


def _tasks(suite: Path) -> list[dict]:
    return [json.loads(line) for line in (suite / "tasks.jsonl").read_text(encoding="utf-8").splitlines()]


def _profile(persona_dir: Path, pid: str) -> dict:
    return json.loads((persona_dir / pid / "profile.json").read_text(encoding="utf-8"))


def test_suite_checks_with_the_evaluator(suite):
    r = invoke("tasks", "check", suite, "--json")
    assert r.returncode == 0, r.stderr
    counts = json.loads(r.stdout)
    assert counts["tasks"] == 56
    assert counts["categories"] == {"persona-L0": 16, "persona-L1": 16, "persona-L2": 16, "ranking": 8}
    assert counts["kinds"] == {"final_state": 48, "ranking": 8, "reference_trajectory": 56, "rubric": 48}
    manifest = json.loads((suite / "manifest.json").read_text())
    cat = load_catalogue()
    used = {t["ground_truth"]["rubric"]["websites"][0] for t in _tasks(suite) if t["category"] != "ranking"}
    assert set(manifest["site_models"]) == used & set(cat.site_models)


def test_suite_is_byte_identical(persona_dir, suite, tmp_path):
    again = tmp_path / "again"
    r = invoke("personas", "tasks", "--personas", persona_dir, "--out", again, "--per-persona", "4")
    assert r.returncode == 0, r.stderr
    assert (again / "tasks.jsonl").read_bytes() == (suite / "tasks.jsonl").read_bytes()


def _best(items: list[dict]) -> dict:
    top = sorted(items, key=lambda it: -it["rating"])
    assert len(top) == 1 or top[0]["rating"] > top[1]["rating"], "the best-rated target is not unique"
    return top[0]


def test_ground_truth_follows_the_catalogue(persona_dir, suite):
    """Recompute every target from the catalogue and the profile, independently of the writer."""
    cat = load_catalogue()
    for t in _tasks(suite):
        if t["category"] == "ranking":
            continue
        prefs = _profile(persona_dir, t["persona"])["preferences"][t["domain"]]
        rubric, checks = t["ground_truth"]["rubric"], t["ground_truth"]["final_state"]
        host = prefs["website"]
        assert rubric["websites"] == [host] and all(c["host"] == host for c in checks)
        items = cat.domain_items(host, t["domain"])
        if t["domain"] == "shopping":
            assert rubric["preferences"] == {k: prefs[k] for k in ("brand", "size", "price_tier")}
            fits = [it for it in items if it["category"] == prefs["category"] and it["brand"] == prefs["brand"]
                    and prefs["size"] in it["sizes"] and it["price_tier"] == prefs["price_tier"]]
            assert checks[0]["contains"] == {"sku": _best(fits)["id"], "size": prefs["size"]}
            assert rubric["location_aware"] is False and "location" not in rubric
        else:
            want = checks[0]["contains"]
            slot = want["slot"]
            fits = [it for it in items if it["category"] == prefs["category"] and it["city"] == prefs["city"]
                    and slot in it["slots"] and (t["domain"] == "hotel" or not prefs.get("neighbourhood")
                                                  or it["neighbourhood"] == prefs["neighbourhood"])
                    and (t["domain"] != "hotel" or it["price_tier"] == prefs["price_tier"])]
            assert want["venue"] == _best(fits)["id"]
            if t["domain"] != "hotel":
                assert slot.endswith(" " + prefs["time"])
            assert rubric["location_aware"] is (host in cat.location_aware)
            assert rubric["location"]["city"] == prefs["city"]
        assert checks[1] == {"host": host, "path": checks[0]["path"], "count": 1}
        gold = rubric["gold_entries"]
        assert set(gold) >= set(rubric["preferences"]) | {"website"} and gold["website"]


def test_final_state_checks_pass_on_the_sites_own_state(suite):
    """Do what the level-0 task asks on a fresh site (its own code, as replay's site model runs it):
    the checks pass; the same request for another item fails them."""
    from werkzeug.test import Client

    from webfreeze.eval.final_state import evaluate_final_state
    from webfreeze.simulator.site_models import SimulatedSiteModel

    cat = load_catalogue()
    tried = set()
    for t in _tasks(suite):
        if t.get("level") != 0 or t["domain"] in tried:
            continue
        tried.add(t["domain"])
        checks = t["ground_truth"]["final_state"]
        host, want = checks[0]["host"], checks[0]["contains"]
        results = []
        for right in (True, False):
            model = SimulatedSiteModel(cat.site_models[host], host)
            state = model.initial_state(0)
            client = Client(state["site"])
            if t["domain"] == "shopping":
                sku = want["sku"] if right else next(it["id"] for it in cat.domain_items(host, "shopping")
                                                     if it["id"] != want["sku"] and want["size"] in it["sizes"])
                resp = client.post("/cart/add", data={"sku": sku, "size": want["size"], "qty": "1"})
            else:
                venue = want["venue"] if right else next(it["id"] for it in cat.domain_items(host, t["domain"])
                                                         if it["id"] != want["venue"] and want["slot"] in it["slots"])
                resp = client.post("/reserve", data={"venue": venue, "slot": want["slot"], "name": want["name"],
                                                     "party": str(want.get("party", 1))})
            assert resp.status_code == 303, resp.get_data(as_text=True)[:300]
            outcome = evaluate_final_state(checks, {"final_state": {host: model.export_state(state)}})
            results.append(outcome["success"])
        assert results == [True, False], t["id"]
    assert tried == {"shopping", "restaurant", "hotel", "clinic"}


def test_reference_trajectories_fit_the_target_pages(suite):
    """The oracle's steps (open the target's page, fill its form) name controls that page has,
    with the option to choose among them; the ranking oracle answers the target first."""
    from lxml import html
    from werkzeug.test import Client

    from webfreeze.simulator.sites import SITES

    kinds = load_catalogue().site_models
    for t in _tasks(suite):
        ref = t["ground_truth"]["reference_trajectory"]
        assert ref["kind"] == "reference_trajectory" and ref["steps"][0] == {
            "step": 0, "action": "navigate", "target": None, "value": None, "url": t["start_url"]}
        assert ref["steps"][-1]["action"] == "answer"
        if t["category"] == "ranking":
            answer = json.loads(ref["steps"][-1]["value"]["text"])
            assert answer[0] == t["ground_truth"]["ranking"]["target"] and len(set(answer)) == 5
            continue
        page = ref["steps"][1]["url"]
        host = page.split("/")[2]
        resp = Client(SITES[kinds[host]](0)).get("/" + page.split("/", 3)[3], base_url=f"http://{host}")
        assert resp.status_code == 200
        doc = html.fromstring(resp.get_data(as_text=True))
        labels = list(doc.iter("label"))
        buttons = {b.text_content().strip() for b in doc.iter("button")}
        for step in ref["steps"][2:-1]:
            name = step["target"]["name"]
            if step["action"] == "click":
                assert name in buttons, (t["id"], name)
                continue
            label = next((lb for lb in labels if lb.text_content().strip().startswith(name)), None)
            assert label is not None, (t["id"], name)
            if step["action"] == "select":
                options = [o.get("value") for o in label.iter("option")]
                assert step["value"]["value"] in options, (t["id"], step["value"], options)


def _mentions(text: str, value: str) -> bool:
    return re.search(rf"(?<![\w-]){re.escape(value)}(?![\w-])", text) is not None


def test_levels_wording(persona_dir, suite):
    cat = load_catalogue()
    names = set(cat.site_names.values()) | {h for hs in cat.domains.values() for h in hs}
    by_set: dict[str, dict[int, dict]] = {}
    for t in _tasks(suite):
        if t["category"] != "ranking":
            by_set.setdefault(t["query_set"], {})[t["level"]] = t
    assert len(by_set) == 16
    for qs, levels in by_set.items():
        host = levels[0]["ground_truth"]["rubric"]["websites"][0]
        prefs = levels[0]["ground_truth"]["rubric"]["preferences"]
        written = [tier_words(v) if k == "price_tier" else str(v) for k, v in prefs.items()]
        l0, l1, l2 = (levels[n]["instruction"] for n in (0, 1, 2))
        assert l0.startswith(f"At {host}, ") and levels[0]["start_url"] == f"http://{host}/"
        assert not re.search(r"\*\*|<[a-z/]|`|\[|#", l0), l0  # no markup
        for text in (l0, l1):
            assert all(_mentions(text, w) for w in written), (text, written)
        for text in (l1, l2):
            assert not any(_mentions(text, n) for n in names), text  # the site is masked
        assert not any(_mentions(l2, w) for w in written), l2  # so are the preferences
        location = levels[0]["ground_truth"]["rubric"].get("location")
        if location:
            assert f"({location['city']}" in l0 and not _mentions(l2, location["city"])
        assert levels[1]["start_url"] == levels[2]["start_url"] == "http://start.test/"


def test_ranking_tasks(persona_dir, suite):
    cat = load_catalogue()
    ranking = [t for t in _tasks(suite) if t["category"] == "ranking"]
    assert len(ranking) == 8 and {t["query_type"] for t in ranking} == {"intent", "refined"}
    for t in ranking:
        truth = t["ground_truth"]["ranking"]
        gold = json.loads((persona_dir / t["persona"] / "gold.json").read_text())["heldout_sessions"][0]
        assert sorted(truth["candidates"]) == sorted([gold["bought"], *gold["viewed"]])
        assert truth["target"] == gold["bought"] and len(truth["candidates"]) == 14
        assert [c["id"] for c in t["candidates"]] == truth["candidates"]
        prefs = _profile(persona_dir, t["persona"])["preferences"]["shopping"]
        by_id = {it["id"]: it for it in cat.domain_items(gold["website"], "shopping")}
        target = by_id[truth["target"]]
        assert (target["brand"], target["price_tier"], prefs["size"] in target["sizes"]) == \
            (prefs["brand"], prefs["price_tier"], True)
        for cid in truth["candidates"]:  # hard negatives: same department, never all three preferences
            it = by_id[cid]
            assert it["category"] == target["category"]
            if cid != truth["target"]:
                assert not (it["brand"] == prefs["brand"] and it["price_tier"] == prefs["price_tier"]
                            and prefs["size"] in it["sizes"])
        assert "JSON list of exactly five candidate ids" in t["instruction"]
    orders = [t["ground_truth"]["ranking"]["candidates"] for t in ranking]
    assert any(o != sorted(o) for o in orders) and len({o.index(t["ground_truth"]["ranking"]["target"])
                                                       for o, t in zip(orders, ranking)}) > 1  # shuffled


def _archive_with(path: Path, urls: list[str]) -> None:
    from webfreeze.archives import Archive, Exchange

    arc = Archive.create(path)
    try:
        session = arc.new_session("record", tool="test")
        for url in urls:
            arc.add_exchange(Exchange(url=url, captured_at="2024-03-15T20:00:00Z", status=200, session_id=session,
                                      resp_headers=[("Content-Type", "text/html")], payload=b"<html></html>"))
        arc.end_session(session)
    finally:
        arc.close()


def test_archive_keeps_only_recorded_tasks(persona_dir, suite, tmp_path):
    tasks = _tasks(suite)
    shop = next(t for t in tasks if t["domain"] == "shopping" and t["level"] == 0)
    host, sku = shop["ground_truth"]["rubric"]["websites"][0], shop["ground_truth"]["final_state"][0]["contains"]["sku"]
    path = next(it["path"] for it in load_catalogue().domain_items(host, "shopping") if it["id"] == sku)
    archive = tmp_path / "a.wfz"
    _archive_with(archive, ["http://start.test/", f"http://{host}/", f"http://{host}{path}"])
    out = tmp_path / "kept"
    r = invoke("personas", "tasks", "--personas", persona_dir, "--out", out, "--per-persona", "4",
                "--archive", archive)
    assert r.returncode == 0, r.stderr
    kept = _tasks(out)
    same_site = [t for t in tasks if t["category"] == "ranking" and t["start_url"] == f"http://{host}/"]
    assert {t["id"] for t in kept} == {f"{shop['query_set']}-L{n}" for n in (0, 1, 2)} | {t["id"] for t in same_site}
    assert f"dropped {56 - len(kept)} of 56 tasks" in r.stdout
    assert json.loads((out / "manifest.json").read_text())["archive_digest"].startswith("sha256:")


def test_levels_option_and_errors(persona_dir, tmp_path):
    out = tmp_path / "l2"
    summary = build_suite(persona_dir, out, levels=[2], per_persona=1, ranking=False)
    assert summary == {"built": 4, "dropped": 0, "tasks": 4, "personalised": 4, "ranking": 0}
    assert {t["category"] for t in _tasks(out)} == {"persona-L2"}
    r = invoke("personas", "tasks", "--personas", persona_dir, "--out", tmp_path / "x", "--levels", "0,3")
    assert r.returncode == 2 and "levels are 0, 1 or 2" in r.stderr and r.stderr.count("\n") == 1
    r = invoke("personas", "tasks", "--personas", tmp_path / "nowhere", "--out", tmp_path / "y")
    assert r.returncode == 1 and r.stderr.count("\n") == 1 and "manifest.json: no such file" in r.stderr
    r = invoke("personas", "tasks", "--personas", persona_dir, "--out", out)
    assert r.returncode == 1 and "not an empty folder" in r.stderr
    assert not (tmp_path / "x").exists() and not (tmp_path / "y").exists()
