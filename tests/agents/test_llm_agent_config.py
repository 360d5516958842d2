"""The LLM agent's settings as config objects (SamplingConfig, MemoryConfig, PromptConfig,
SchemeConfig, ContextConfig): the same agent as its flat JSON settings, with the same config (the
run's identity) key for key and in the same order, so runs recorded before compare equal."""

from __future__ import annotations

import dataclasses
import json

import pytest

from webfreeze.agents import AgentError, agent_settings, make_agent
from webfreeze.agents.llm_agent import (
    GROUPS,
    SETTING_NAMES,
    ContextConfig,
    LLMAgent,
    MemoryConfig,
    PromptConfig,
    SamplingConfig,
    SchemeConfig,
)

FLAT = [
    {"model": "m"},
    {"model": "m", "base_url": "http://127.0.0.1:9/v1", "temperature": 0.5, "top_p": 0.9, "seed": None,
     "max_tokens": 50, "api_key_env": ""},
    {"model": "m", "memory": "random-k", "k": 2, "memory_seed": 7, "dialect": "browsergym", "vision": True,
     "obs_tokens": 400},
    {"model": "m", "memory": "dynamic", "m": 1, "scheme": "pre-execution", "history_queries": 2},
    {"model": "m", "irag": True, "reflection": True, "reflection_tokens": 40, "context_tokens": 2000},
]


def grouped(flat: dict) -> dict:
    """The same settings as config objects."""
    return {arg: cls.from_flat(flat) for arg, cls in GROUPS}


@pytest.mark.parametrize("flat", FLAT, ids=range(len(FLAT)))
def test_config_objects_make_the_agent_the_flat_settings_make(flat):
    by_flat, by_groups = LLMAgent(**flat), LLMAgent(**grouped(flat))
    assert json.dumps(by_flat.config()) == json.dumps(by_groups.config())
    assert by_flat.llm_config == by_groups.llm_config and by_flat.system == by_groups.system
    # the flat settings given are the config's, by their flat names
    config = by_groups.config()
    for key, value in flat.items():
        assert config.get(key, value) == (None if key == "api_key_env" and value == "" else value)
    # a group at its defaults adds no key: scheme and long-context keys only when set
    assert ("scheme" in config) == ("scheme" in flat)
    assert ("irag" in config) == ("irag" in flat)


def test_the_flat_settings_are_the_groups_fields_in_order():
    assert list(SETTING_NAMES) == [key for _, cls in GROUPS for key in cls.FLAT]
    assert agent_settings("llm") == list(SETTING_NAMES)
    for _, cls in GROUPS:
        assert sorted(cls.FLAT.values()) == sorted(f.name for f in dataclasses.fields(cls))
    # the default agent's config: every flat setting of the first three groups, in their order
    config = list(LLMAgent(model="m").config())
    assert config[:15] == [key for _, cls in GROUPS[:3] for key in cls.FLAT]


def test_config_objects_are_frozen_and_check_their_values():
    sampling = SamplingConfig(model="m")
    with pytest.raises(dataclasses.FrozenInstanceError):
        sampling.model = "other"  # type: ignore[misc]
    assert SamplingConfig(api_key_env="").api_key_env is None
    bad = [(SamplingConfig, {"top_p": 0}, "top_p must be above 0"),
           (MemoryConfig, {"strategy": "all"}, "unknown memory strategy 'all'"),
           (MemoryConfig, {"seed": 1.5}, "memory_seed must be a whole number"),
           (PromptConfig, {"dialect": "klingon"}, "unknown dialect 'klingon'"),
           (SchemeConfig, {"queries": 0}, "history_queries must be a whole number, 1 or more"),
           (ContextConfig, {"reflection_tokens": 5}, "reflection_tokens needs reflection=true")]
    for cls, fields, message in bad:
        with pytest.raises(AgentError, match=message):
            cls(**fields)


def test_a_group_given_twice_or_of_the_wrong_type_is_refused():
    with pytest.raises(AgentError, match=r"^give memory=MemoryConfig\(...\) or its settings \(k\), not both$"):
        LLMAgent(model="m", memory=MemoryConfig(k=1), k=2)
    with pytest.raises(AgentError, match=r"^sampling must be a SamplingConfig \(not dict\)$"):
        LLMAgent(sampling={"model": "m"})
    with pytest.raises(AgentError, match="agent 'llm' has no setting 'sampling'"):
        make_agent("llm", sampling=SamplingConfig(model="m"))  # the JSON path takes the flat settings only
    with pytest.raises(AgentError, match="irag=true works with scheme=no-history only"):
        LLMAgent(sampling=SamplingConfig(model="m"), scheme=SchemeConfig(scheme="on-demand"),
                 context=ContextConfig(irag=True))
