"""A run scored by the LLM judge travels with the judge's cassette, and ``bundle run`` scores the
re-run by that judge, strictly from it (the text backend, one demo task: a few seconds)."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import pytest
from cli_runner import assert_one_line_error, invoke

from webfreeze.demo import SUITE
from webfreeze.eval.llm_judge import JUDGE_CASSETTE, llm_judge_setting
from webfreeze.llm import Cassette
from webfreeze.llm.local import LOCAL_MODEL_ID


def judged_run(tmp_path: Path) -> Path:
    """The reference agent on one demo task, its report by the local LLM judge replayed from a
    cassette of its own (empty: the rules decide everything on this task, the judge is named)."""
    run = tmp_path / "judged"
    played = invoke("bench", "run", SUITE, "--agent", "reference", "--backend", "text", "--tasks", "shop-001",
                    "--out", run, "--no-report")
    assert played.returncode == 0, played.stderr
    with Cassette(run / JUDGE_CASSETTE, "record"):
        pass
    scored = invoke("eval", "report", run, "--judge", "llm", "--judge-cassette-mode", "replay")
    assert scored.returncode == 0, scored.stderr
    assert json.loads((run / "report.json").read_text())["judge"] == f"llm judge ({LOCAL_MODEL_ID}, temperature 0)"
    return run


def test_a_judged_run_is_re_scored_by_its_judge_from_the_bundle(tmp_path):
    run = judged_run(tmp_path)
    bundle = tmp_path / "judged.wfb"
    packed = invoke("bundle", "pack", run, "-o", bundle)
    assert packed.returncode == 0, packed.stderr
    with zipfile.ZipFile(bundle) as zf:
        assert f"runs/judged/{JUDGE_CASSETTE}" in zf.namelist()
    again = invoke("bundle", "run", bundle, "--out", tmp_path / "again")
    assert again.returncode == 0, again.stdout + again.stderr
    # (scored by the rules judge, the re-run's report would name another judge: not identical)
    assert "judged: identical to the bundled run" in again.stdout, again.stdout
    rescored = json.loads((tmp_path / "again" / "runs" / "judged" / "report.json").read_text())
    assert rescored["judge"].startswith("llm judge (")


def test_a_judged_run_without_its_judge_cassette_is_refused(tmp_path):
    run = judged_run(tmp_path)
    (run / JUDGE_CASSETTE).unlink()
    refused = invoke("bundle", "pack", run, "-o", tmp_path / "no.wfb")
    assert_one_line_error(refused, contains="scored by the LLM judge")
    assert not (tmp_path / "no.wfb").exists()
    # nor packed redacted: the judge saw what redaction takes away
    (run / JUDGE_CASSETTE).touch()
    refused = invoke("bundle", "pack", run, "-o", tmp_path / "red.wfb", "--redact")
    assert_one_line_error(refused, contains="scored by the LLM judge")


def test_the_judge_setting_is_read_from_its_name():
    assert llm_judge_setting(f"llm judge ({LOCAL_MODEL_ID}, temperature 0)") == "local"
    assert llm_judge_setting("llm judge (gpt-x, temperature 0)").startswith("gpt-x@http://127.0.0.1")
    assert llm_judge_setting("token-overlap (rule-based stand-in, no language model)") is None
    assert llm_judge_setting(None) is None


def test_a_judge_call_the_bundled_cassette_lacks_is_one_line_error(tmp_path):
    """``bundle run`` replays the judge strictly: a call the cassette does not hold is a one-line
    error, never a new verdict nor a call out (the remote judge's endpoint is one never called)."""
    from webfreeze.eval.errors import ReportError
    from webfreeze.eval.llm_judge import open_llm_judge

    cassette = tmp_path / JUDGE_CASSETTE
    with Cassette(cassette, "record"):
        pass
    for name in (f"llm judge ({LOCAL_MODEL_ID}, temperature 0)", "llm judge (gpt-x, temperature 0)"):
        with open_llm_judge(tmp_path, llm=llm_judge_setting(name), cassette=cassette, mode="replay") as judge:
            assert judge.name == name  # (the re-run's report names the same judge)
            with pytest.raises(ReportError) as caught:
                judge.judge("Which colour?", "red", "red")
        message = str(caught.value)
        assert message.startswith("LLM judge: ") and "no stored LLM call" in message and "\n" not in message, message
