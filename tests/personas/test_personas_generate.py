"""User histories: the loader and its errors, the digest, and the persona generator (determinism,
statistics, implicit preferences, gold entries)."""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path

import pytest
from cli_runner import invoke

from webfreeze.personas.catalogue import load_catalogue
from webfreeze.personas.generate import generate, generate_persona
from webfreeze.personas.history import HistoryError, history_digest, load_history, parse_history_text

SEED = 5
ENTRY = {"timestamp": "2024-01-02 10:11:12", "type": "purchase", "object": "Acme Red Sandal (size 40), $20.00",
         "website": "shop.test"}


def _files(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


# ------------------------------------------------------------------------------------ loader
def _write(tmp_path: Path, name: str, text: str) -> Path:
    p = tmp_path / name
    p.write_text(text, encoding="utf-8")
    return p


def test_loader_reads_jsonl_and_numbers_entries_without_ids(tmp_path):
    lines = [dict(ENTRY), dict(ENTRY, type="web visit", status="cancelled", id="x-1")]
    path = _write(tmp_path, "h.jsonl", "\n".join(json.dumps(e) for e in lines) + "\n\n")
    entries = load_history(path)
    assert [e["id"] for e in entries] == ["h00001", "x-1"]
    assert entries[1]["status"] == "cancelled" and "status" not in entries[0]
    assert list(entries[0]) == ["id", "timestamp", "type", "object", "website"]


@pytest.mark.parametrize("line, message", [
    ("{not json", "not valid JSON"),
    (json.dumps(dict(ENTRY, type="buy")), "type 'buy' is not one of"),
    (json.dumps(dict(ENTRY, timestamp="2024-01-02")), "is not 'YYYY-MM-DD HH:MM:SS'"),
    (json.dumps(dict(ENTRY, timestamp="2024-02-30 10:00:00")), "not a real date"),
    (json.dumps({k: v for k, v in ENTRY.items() if k != "website"}), "entry has no 'website'"),
    (json.dumps(dict(ENTRY, status="refunded")), "status 'refunded' is not one of cancelled, modified"),
    (json.dumps(dict(ENTRY, object="  ")), "'object' is empty"),
    ("[1, 2]", "an entry must be a JSON object"),
])
def test_loader_errors_name_file_and_line(tmp_path, line, message):
    path = _write(tmp_path, "h.jsonl", json.dumps(ENTRY) + "\n\n" + line + "\n")
    with pytest.raises(HistoryError) as err:
        load_history(path)
    text = str(err.value)
    assert text.startswith(f"{path}:3: ") and message in text and "\n" not in text


def test_loader_rejects_a_repeated_id_naming_both_lines(tmp_path):
    path = _write(tmp_path, "h.jsonl", "\n".join(json.dumps(dict(ENTRY, id="a")) for _ in range(2)) + "\n")
    with pytest.raises(HistoryError, match=r"h\.jsonl:2: id 'a' repeats the one at 1$"):
        load_history(path)


def test_loader_file_errors(tmp_path):
    with pytest.raises(HistoryError, match="no such history file"):
        load_history(tmp_path / "missing.jsonl")
    bad = tmp_path / "latin.jsonl"
    bad.write_bytes(json.dumps(ENTRY).encode() + b"\n" + b'{"object": "caf\xe9"}\n')
    with pytest.raises(HistoryError, match=r"latin\.jsonl:2: not UTF-8 text"):
        load_history(bad)


def test_memory_bank_json(tmp_path):
    bank = {"memory_bank": [dict(ENTRY), dict(ENTRY, timestamp="2024-01-03T09:00:00", type="review & rating",
                                                   object="Acme Red Sandal: 5/5", status=None)]}
    path = _write(tmp_path, "memory.json", json.dumps(bank, indent=2))
    entries = load_history(path)
    assert [e["timestamp"] for e in entries] == ["2024-01-02 10:11:12", "2024-01-03 09:00:00"]
    assert "status" not in entries[1] and entries[1]["id"] == "h00002"
    bank["memory_bank"][1]["type"] = "rating"
    path = _write(tmp_path, "memory2.json", json.dumps(bank))
    with pytest.raises(HistoryError, match=r"memory2\.json:memory_bank entry 2: type 'rating'"):
        load_history(path)
    path = _write(tmp_path, "memory3.json", '{"memory_bank": [\n  {"timestamp": 1,\n}')
    with pytest.raises(HistoryError, match=r"memory3\.json:3: not valid JSON"):
        load_history(path)


def test_digest_ignores_formatting_and_sees_content():
    entries = parse_history_text(json.dumps(dict(ENTRY, id="a")) + "\n")
    spaced = parse_history_text(json.dumps(dict(ENTRY, id="a"), indent=None, separators=(" ,", " : ")) + "\n")
    assert history_digest(entries) == history_digest(spaced)
    assert history_digest(entries).startswith("sha256:") and len(history_digest(entries)) == 71
    changed = [dict(entries[0], object="Acme Red Sandal (size 41), $20.00")]
    assert history_digest(changed) != history_digest(entries)


# ------------------------------------------------------------------------------------ generator
@pytest.fixture(scope="module")
def personas(tmp_path_factory):
    out = tmp_path_factory.mktemp("personas") / "p"
    generate(out, n=4, seed=SEED)
    return out


def test_generate_cli_is_byte_identical_for_a_seed(tmp_path):
    a, b, c = tmp_path / "a", tmp_path / "b", tmp_path / "c"
    for folder, seed in ((a, 9), (b, 9), (c, 10)):
        r = invoke("personas", "generate", "--n", "2", "--seed", str(seed), "--out", folder)
        assert r.returncode == 0, r.stderr
        assert f"wrote 2 personas (seed {seed})" in r.stdout
    files_a = _files(a)
    assert set(files_a) == {"manifest.json", "p01/history.jsonl", "p01/profile.json", "p01/gold.json",
                            "p02/history.jsonl", "p02/profile.json", "p02/gold.json"}
    assert files_a == _files(b)
    assert files_a["p01/history.jsonl"] != _files(c)["p01/history.jsonl"]
    manifest = json.loads(files_a["manifest.json"])
    assert (manifest["format"], manifest["version"], manifest["seed"], manifest["n"], manifest["personas"]) == \
        ("webfreeze-personas", 1, 9, 2, ["p01", "p02"])


def test_generate_cli_refuses_a_non_empty_folder(tmp_path):
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "keep.txt").write_text("mine")
    r = invoke("personas", "generate", "--n", "1", "--out", tmp_path / "out")
    assert r.returncode == 1 and r.stderr.count("\n") == 1 and "not an empty folder" in r.stderr
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["keep.txt"]
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".out.")]  # no half-written folder left


def test_history_statistics(personas):
    manifest = json.loads((personas / "manifest.json").read_text())
    for pid in manifest["personas"]:
        entries = load_history(personas / pid / "history.jsonl")
        assert 1900 <= len(entries) <= 2100
        stamps = [e["timestamp"] for e in entries]
        assert stamps == sorted(stamps)
        assert stamps[0] >= "2023-03-15" and stamps[-1] < "2024-03-15"  # one year before the sites' "now"
        hours = Counter(int(s[11:13]) for s in stamps)
        assert not any(hours[h] for h in (2, 3, 4, 5)), "an entry between 2 and 6 am"
        assert len(hours) == 20  # every other hour of the day is used
        assert {e["type"] for e in entries} == {"web search", "web visit", "purchase", "booking", "review & rating"}
        hosts = {h for hs in load_catalogue().domains.values() for h in hs}
        off_site = sum(1 for e in entries if e["website"] not in hosts) / len(entries)
        assert 0.2 < off_site < 0.5
        assert len({e["id"] for e in entries}) == len(entries)


def test_events_and_cancelled_share():
    shares = []
    for pid in ("p01", "p02", "p03", "p04"):
        persona = generate_persona(pid, SEED)
        sizes = Counter(len(ev.entries) for ev in persona.events)
        assert min(sizes) >= 1 and max(sizes) <= 8 and len(sizes) >= 5  # events of 1 to 8 entries, varied
        changed = [ev for ev in persona.events if any("status" in e for e in ev.entries)]
        shares.append(len(changed) / len(persona.events))
        for ev in changed:  # only an order or a booking is cancelled or modified
            assert all(e["type"] in ("purchase", "booking") for e in ev.entries if "status" in e)
        statuses = Counter(e["status"] for ev in changed for e in ev.entries if "status" in e)
        assert statuses["cancelled"] and statuses["modified"]
    assert 0.07 <= sum(shares) / len(shares) <= 0.13  # about 10% of events


STATED = re.compile(r"\b(prefer\w*|favou?rite\w*|usual\w*|always|loves?|likes?|fan of|my size|go-to)\b", re.I)


def test_preferences_are_implicit_but_repeated(personas):
    cat = load_catalogue()
    for pid in ("p01", "p02", "p03", "p04"):
        entries = load_history(personas / pid / "history.jsonl")
        profile = json.loads((personas / pid / "profile.json").read_text())
        stated = [e["object"] for e in entries if STATED.search(e["object"])]
        assert not stated, f"{pid} states a preference: {stated[:3]}"
        shop = profile["preferences"]["shopping"]
        # never stated, yet the most frequent brand bought and the most visited shop are the preferred ones
        brands = {it["name"]: it["brand"] for h in cat.domains["shopping"] for it in cat.items[h]}
        bought = Counter(brands[e["object"].split(" (size")[0].rsplit(",", 1)[0]] for e in entries
                         if e["type"] == "purchase" and e.get("status") != "cancelled"
                         and e["website"] in cat.domains["shopping"])
        assert bought.most_common(1)[0][0] == shop["brand"]
        sites = Counter(e["website"] for e in entries if e["website"] in cat.domains["shopping"])
        assert sites.most_common(1)[0][0] == shop["website"]
        sizes = Counter(m.group(1) for e in entries if e["type"] == "purchase"
                        for m in [re.search(r"\(size (\S+)\)", e["object"])] if m)
        assert sizes.most_common(1)[0][0] == shop["size"]
        food = profile["preferences"]["restaurant"]
        times = Counter(e["object"][-5:] for e in entries
                        if e["type"] == "booking" and e["object"].startswith("Table for"))
        assert times.most_common(1)[0][0] == food["time"]


def test_preferences_come_from_the_catalogue(personas):
    cat = load_catalogue()
    for pid in ("p01", "p02", "p03", "p04"):
        prefs = json.loads((personas / pid / "profile.json").read_text())["preferences"]
        s = prefs["shopping"]
        assert any(it["brand"] == s["brand"] and s["size"] in it["sizes"] and it["price_tier"] == s["price_tier"]
                   and it["category"] == s["category"] for it in cat.domain_items(s["website"], "shopping"))
        for domain in ("restaurant", "hotel", "clinic"):
            p = prefs[domain]
            assert p["website"] in cat.domains[domain]
            assert any(it["category"] == p["category"] and it.get("city") == p["city"]
                       for it in cat.domain_items(p["website"], domain))


def test_gold_entries_carry_their_preference(personas):
    for pid in ("p01", "p03"):
        entries = {e["id"]: e for e in load_history(personas / pid / "history.jsonl")}
        gold = json.loads((personas / pid / "gold.json").read_text())
        assert gold["format"] == "webfreeze-persona-gold" and gold["persona"] == pid
        keys = {(g["domain"], g["key"]) for g in gold["preferences"]}
        assert {("shopping", "brand"), ("shopping", "size"), ("shopping", "website"), ("restaurant", "time")} <= keys
        for g in gold["preferences"]:
            if g["key"] not in ("price_tier", "color"):
                assert g["entries"], g
            for eid in g["entries"]:
                e = entries[eid]
                assert e.get("status") != "cancelled"
                text = e["object"].lower()
                if g["key"] == "website":
                    assert e["website"] == g["value"]
                elif g["key"] == "size":
                    assert f"size {g['value'].lower()}" in text
                elif g["key"] in ("brand", "category", "neighbourhood", "city", "time"):
                    assert g["value"].lower() in text, (g["key"], e)
        session = gold["heldout_sessions"][0]
        assert len(session["viewed"]) == 13 and session["bought"] not in session["viewed"]
