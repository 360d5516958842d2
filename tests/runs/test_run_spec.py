"""RunSpec is frozen and typed: its settings are checked when it is built (build_run, webfreeze.run),
one RunError line naming the setting, before anything is written; prepare() fills a new spec in
and leaves the given one as it was."""

from __future__ import annotations

import dataclasses

import pytest

import webfreeze as wf
from webfreeze.demo import SUITE
from webfreeze.runs.prepare import prepare
from webfreeze.runs.spec import ContextSettings, HistorySettings, RunError, RunSpec, build_run

BAD = [
    ({"seed": "1"}, r"^seed must be a whole number \(not '1'\)$"),
    ({"max_steps": 0}, r"^max_steps must be a whole number, 1 or more \(not 0\)$"),
    ({"screenshots": "yes"}, r"^screenshots must be true or false"),
    ({"backend": "firefox"}, r"^unknown backend 'firefox'"),
    ({"limit": 0}, r"^--limit must be at least 1$"),
    ({"tasks": [3]}, r"^tasks must be task-id globs"),
    ({"site_models": {"shop.test": "mall"}}, r"^site model shop.test=mall: unknown kind"),
    ({"agent_config": ["max_clicks"]}, r"^agent_config must be a table of named settings"),
    ({"history": {"k": 0}}, r"^history k \(--history-k\) must be a whole number, 1 or more \(not 0\)$"),
    ({"history": {"top": 3}}, r"^unknown history setting 'top' \(known: k, threshold, model, key_fields\)$"),
    ({"history": {"key_fields": "colour"}}, r"^history key_fields \(--key-fields\) takes some of"),
    ({"context": {"tokens": "lots"}}, r"^context.tokens: must be 'none', a number or NNk"),
    ({"context": {"tokens": 0, "colour": 1}}, r"^context: unknown key 'colour'"),
    ({"workers": 0}, r"^--workers must be at least 1$"),
    ({"cassette_mode": "rewind"}, r"^unknown cassette mode 'rewind'"),
    ({"llm_concurrency": 0}, r"^llm_concurrency must be a whole number, 1 or more \(not 0\)$"),
    ({"retries": 1.5}, r"^retries must be a whole number"),
    ({"colour": "red"}, r"^a run has no setting 'colour'"),
]


@pytest.mark.parametrize("settings, message", BAD, ids=[next(iter(s)) + str(i) for i, (s, _) in enumerate(BAD)])
def test_a_bad_setting_is_refused_when_the_run_is_built(settings, message, tmp_path):
    with pytest.raises(RunError, match=message):
        build_run(SUITE, "keyword", tmp_path / "run", **settings)
    with pytest.raises(RunError, match=message):  # the library's run: refused before anything is written
        wf.run(SUITE, "keyword", tmp_path / "run", **settings)
    assert not (tmp_path / "run").exists()


def test_the_spec_is_frozen_and_its_settings_typed(tmp_path):
    spec, options = build_run(SUITE, "keyword", tmp_path / "run", tasks="shop-*",
                              history={"k": 5, "key_fields": "type,website"}, context={"tokens": 0})
    with pytest.raises(dataclasses.FrozenInstanceError):
        spec.seed = 1  # type: ignore[misc]
    assert spec.tasks == ("shop-*",)
    assert spec.history == HistorySettings(k=5, key_fields=("type", "website"))
    assert spec.history.as_dict() == {"k": 5, "threshold": 0.5, "model": "all-MiniLM-L6-v2",
                                      "key_fields": ["type", "website"]}
    assert isinstance(spec.context, ContextSettings) and spec.context.tokens == 0 and spec.context.pool is None
    assert build_run(SUITE, "keyword", tmp_path / "run", context={})[0].context is None
    # typed settings pass through as they are; equal settings make equal specs
    again = RunSpec(suite=spec.suite, agent="keyword", tasks=["shop-*"], history=spec.history, context=spec.context)
    assert again == spec
    # a caller's table changed afterwards does not change the spec
    models = {"shop.test": "shop"}
    built = build_run(SUITE, "keyword", tmp_path / "run", site_models=models)[0]
    models["booking.test"] = "booking"
    assert built.site_models == {"shop.test": "shop"}


def test_prepare_fills_in_a_new_spec_and_leaves_the_given_one(tmp_path):
    spec, options = build_run(SUITE, "keyword", tmp_path / "run", backend="text", tasks=["shop-001"])
    before = dataclasses.replace(spec)
    prep = prepare(spec, options)
    assert spec == before and spec.site_models == {}
    assert prep.spec is not spec and prep.spec.site_models == {"booking.test": "booking", "shop.test": "shop"}
    assert prep.manifest["env"]["site_models"] == prep.spec.site_models
    assert prep.manifest["selection"]["tasks"] == ["shop-001"]
