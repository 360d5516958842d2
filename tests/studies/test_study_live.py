"""Live studies (``live = true``, docs/studies.md and docs/live.md): the study file's checks, the
digest that stays as it was without the keys, and a real study run live against the simulated
scholar site served by the test, whose cells each record their own archive and replay offline to
identical runs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
from logged_app import Logged

from webfreeze.archives import archive_digest
from webfreeze.demo import SUITE
from webfreeze.eval.report import write_report
from webfreeze.runs.compare import run_difference
from webfreeze.runs.execute import execute
from webfreeze.runs.prepare import prepare
from webfreeze.simulator.sites import SITES
from webfreeze.simulator.sites.common import SiteServer
from webfreeze.studies.run import StudyOptions, cell_config, plan_study
from webfreeze.studies.spec import CELLS_DIR, StudyError, digest_of, load_study, parse_study

AGENT = '[[agents]]\nname = "reference"\n'


def _study(tmp_path: Path, text: str, name: str = "s.toml") -> Path:
    path = tmp_path / name
    path.write_text(f'suite = "{SUITE}"\n' + text, encoding="utf-8")
    return path


@pytest.fixture
def scholar():
    app = Logged(SITES["scholar"](0))
    server = SiteServer(app).start()
    server.log = app.log
    yield server
    server.stop()


# ------------------------------------------------------------------------------------ the study file
@pytest.mark.parametrize("text, key, words", [
    ('live = true\narchive = "a.wfz"\n', "live", "archive names an archive to replay"),
    ('live = true\nsnapshots = ["a.wfz", "b.wfz"]\n', "live", "snapshots names archives to replay"),
    ('live = "yes"\n', "live", "expected true or false"),
    ('[resolve]\n"scholar.test" = "127.0.0.1:8001"\n', "resolve", "needs live = true"),
    ('live = false\n[resolve]\n"scholar.test" = "127.0.0.1:8001"\n', "resolve", "needs live = true"),
    ('live = true\nresolve = "scholar.test=127.0.0.1:1"\n', "resolve", "expected a table"),
    ('live = true\n[resolve]\n"scholar.test" = "127.0.0.1"\n', "resolve.scholar.test", "ADDRESS:PORT"),
    ('live = true\n[resolve]\n"scholar.test" = 8001\n', "resolve.scholar.test", "expected a non-empty string"),
])
def test_incoherent_live_settings_are_refused_in_one_line(tmp_path, text, key, words):
    with pytest.raises(StudyError) as err:
        load_study(_study(tmp_path, text + AGENT))
    msg = str(err.value)
    assert "\n" not in msg and f": {key}: " in msg and words in msg, msg


def test_a_live_study_does_not_generate_personas_on_an_archive():
    data = {"live": True, "archive": "a.wfz", "personas": {"n": 1}, "agents": [{"name": "reference"}]}
    with pytest.raises(StudyError, match=r"^study file: live: .*archive names an archive to replay"):
        parse_study(data)


def test_the_digest_of_a_study_without_live_keys_is_as_before(tmp_path):
    study = load_study(_study(tmp_path, 'backend = "text"\n' + AGENT))
    assert "live" not in study.normalised and "resolve" not in study.normalised
    assert study.digest == digest_of(study.normalised)  # (how every study's digest was made before)


def test_where_a_site_is_reached_is_not_what_the_study_is(tmp_path):
    one = load_study(_study(tmp_path, 'live = true\n[resolve]\n"Scholar.test" = "127.0.0.1:8001"\n' + AGENT, "a.toml"))
    two = load_study(_study(tmp_path, 'live = true\n[resolve]\n"scholar.test" = "127.0.0.1:9002"\n' + AGENT, "b.toml"))
    plain = load_study(_study(tmp_path, 'live = true\n' + AGENT, "c.toml"))
    assert one.normalised["resolve"] == {"scholar.test": "127.0.0.1:8001"}
    assert one.digest == two.digest == plain.digest  # a circumstance, kept in study.json
    offline = load_study(_study(tmp_path, AGENT, "d.toml"))
    assert offline.digest != plain.digest  # a live study is another study
    assert parse_study({"suite": "s", "live": True, "agents": [{"name": "reference"}]})["live"] is True



def test_a_live_study_on_another_executor_stops_in_one_line_naming_the_cell(tmp_path):
    path = _study(tmp_path, 'backend = "text"\nlive = true\n[tasks]\nids = ["scholar-site-info-001"]\n' + AGENT)
    proc = subprocess.run([sys.executable, "-m", "webfreeze", "study", "run", str(path), "--out", str(tmp_path / "out"),
                           "--executor", "ray"], capture_output=True, text=True, timeout=300, check=False,
                          env={**os.environ, "WEBFREEZE_HOME": str(tmp_path / "home")})
    assert proc.returncode == 1 and proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr
    assert "cell reference.r0: " in proc.stderr and "local executor only" in proc.stderr
    study = json.loads((tmp_path / "out" / "study.json").read_text(encoding="utf-8"))
    assert "local executor only" in study["cells"][0]["error"]  # recorded for the user, as a RunError is
    assert not (tmp_path / "out" / CELLS_DIR / "reference.r0" / "manifest.json").exists()

# ------------------------------------------------------------------------------------ a real live study
@pytest.mark.slow
def test_a_live_study_records_each_cell_which_replays_identically_offline(tmp_path, monkeypatch, scholar):
    monkeypatch.setenv("WEBFREEZE_HOME", str(tmp_path / "home"))  # a private recording CA
    path = _study(tmp_path, 'backend = "text"\nrepeats = 2\nlive = true\n'
                            '[tasks]\nids = ["scholar-paper-retrieval-00[12]"]\n'
                            f'[resolve]\n"scholar.test" = "127.0.0.1:{scholar.port}"\n' + AGENT)
    out = tmp_path / "out"
    proc = subprocess.run([sys.executable, "-m", "webfreeze", "study", "run", str(path), "--out", str(out)],
                          capture_output=True, text=True, timeout=600, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert scholar.log, "the cells reached the live site"
    study = json.loads((out / "study.json").read_text(encoding="utf-8"))
    assert study["complete"] and {c["status"] for c in study["cells"]} == {"complete"}
    assert study["study"]["resolve"] == {"scholar.test": f"127.0.0.1:{scholar.port}"}
    cells = sorted(p.name for p in (out / CELLS_DIR).iterdir())
    assert cells == ["reference.r0", "reference.r1"]
    for cid in cells:
        run = out / CELLS_DIR / cid
        manifest = json.loads((run / "manifest.json").read_text(encoding="utf-8"))
        live = manifest["circumstances"]["live"]
        assert live["mode"] == "record" and live["archive"] == "live.wfz" and live["site_failures"] == 0
        assert manifest["archive"]["digest"] == archive_digest(run / "live.wfz")  # its own archive
        for p in (run / "trajectories").glob("*.json"):
            assert json.loads(p.read_text(encoding="utf-8"))["end"]["reason"] == "answer"

    # a strict offline re-run of one cell on the archive it recorded: the same run, byte for byte
    plan = plan_study(load_study(path), out)
    cell = next(c for c in plan.cells if c.id == "reference.r1")
    spec, options = cell_config(plan, cell, StudyOptions())
    recorded = out / CELLS_DIR / cell.id
    offline = tmp_path / "offline"
    seen = len(scholar.log)
    execute(prepare(replace(spec, archive=str(recorded / "live.wfz")),
                    replace(options, out=str(offline), live=False, resolve={})))
    write_report(offline)
    assert len(scholar.log) == seen, "the offline re-run never reached the site"
    assert run_difference(recorded, offline) is None
