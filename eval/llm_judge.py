"""An LLM judge: the :class:`~webfreeze.eval.judge.Judge` interface answered by a language model
through the LLM layer (``webfreeze.llm``) and its cassette, so that a judged report replays exactly.

Used by ``webfreeze eval report --judge llm`` for what rules cannot decide (semantic key nodes,
rubric items the rules did not find, a rubric intent with no other ground truth). The prompt is
ours (docs/suites-and-runs.md, "The judge"); the verdict is read from the reply's first word: ``yes`` 1,
``no`` 0, or a number clamped to [0, 1]; anything else 0.
"""

from __future__ import annotations

import contextlib
import os
import re
from pathlib import Path
from typing import Iterator

from .errors import ReportError
from .text import contains_phrase, tokens

JUDGE_CASSETTE = "judge-cassette.sqlite"
# The tiny local model has a 4k-token context: the evidence shown is cut to this many characters.
MAX_EVIDENCE_CHARS = 3000
SYSTEM = ("You grade a web agent's work. You get a question, what was expected, and evidence from the agent's "
          "run. Reply with one word: yes or no.")
_NUMBER = re.compile(r"^[+-]?(?:\d+(?:\.\d*)?|\.\d+)")


def parse_verdict(text: str | None) -> float:
    """``yes`` -> 1, ``no`` -> 0, a leading number -> clamped to [0, 1], else 0."""
    t = (text or "").strip().lstrip("*\"'`").casefold()
    if t.startswith("yes"):
        return 1.0
    if t.startswith("no"):
        return 0.0
    m = _NUMBER.match(t)
    if m:
        return min(1.0, max(0.0, float(m.group(0))))
    return 0.0


def shown_evidence(candidate: str, reference: str, limit: int = MAX_EVIDENCE_CHARS) -> str:
    """The evidence as the judge is shown it: when longer than ``limit`` characters, its lines are
    reordered (stably) so that those containing the expected value come first, then those sharing
    one of its words, then the rest, and the text is cut at ``limit`` with " ..." (a value at the
    end of a long history must not be cut away)."""
    if len(candidate) <= limit:
        return candidate
    lines = candidate.split("\n")
    if reference:
        words = set(tokens(reference))
        lines.sort(key=lambda ln: (not contains_phrase(ln, reference), not (words & set(tokens(ln)))))
    text = "\n".join(lines)
    return text if len(text) <= limit else text[:limit] + " ..."


class LLMJudge:
    """A judge backed by an :class:`~webfreeze.llm.LLMClient` (its cassette makes it replayable)."""

    def __init__(self, client, name: str | None = None):
        self.client = client
        self.name = name or f"llm judge ({client.config.model})"

    def messages(self, question: str, candidate: str, reference: str) -> list[dict]:
        evidence = shown_evidence(candidate, reference)
        user = f"Question: {question}\n"
        if reference:
            user += f"Expected: {reference}\n"
        user += f"Evidence:\n{evidence}\nAnswer yes or no."
        return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": user}]

    def judge(self, question: str, candidate: str, reference: str) -> float:
        from webfreeze.llm import LLMError

        try:
            reply = self.client.chat(self.messages(question, candidate, reference), purpose="judge")
        except LLMError as exc:  # a strict-replay miss, a provider down: the report cannot be made
            raise ReportError(f"LLM judge: {exc}") from None
        return parse_verdict(reply.text)


def _config(llm: str, key_env: str | None):
    from webfreeze.llm import LLMConfig, local_config

    if llm == "local":
        return local_config(max_tokens=4)
    model, sep, base_url = llm.partition("@")
    if not sep or not model or not base_url:
        raise ReportError(f"--judge-llm {llm!r}: give 'local' or MODEL@BASE_URL")
    return LLMConfig(model=model, base_url=base_url, api_key_env=key_env or "OPENAI_API_KEY", max_tokens=4)


# The name an LLM judge gives itself in reports (open_llm_judge): its model's identity.
_JUDGE_NAME = re.compile(r"^llm judge \((?P<model>.+), temperature 0\)$")
# Where a judge replayed strictly from its cassette would send a call it does not hold: never, a
# call not in the cassette is an error first. (The cassette keys a request by its model, not by its
# endpoint, so a remote judge's endpoint need not be known to replay it.)
_NOWHERE = "http://127.0.0.1:9/v1"


def llm_judge_setting(judge_name: str | None) -> str | None:
    """The ``--judge-llm`` setting that replays a report's LLM judge from its cassette, read from
    the judge's name in the report (``judge``): ``local`` for the embedded model, else
    ``MODEL@<an endpoint never called>``; None when the report was not scored by an LLM judge."""
    from webfreeze.llm.local import LOCAL_MODEL_ID

    m = _JUDGE_NAME.match(judge_name or "")
    if m is None:
        return None
    model = m.group("model")
    return "local" if model == LOCAL_MODEL_ID else f"{model}@{_NOWHERE}"


@contextlib.contextmanager
def open_llm_judge(run_dir: str | os.PathLike, *, llm: str = "local", key_env: str | None = None,
                   cassette: str | os.PathLike | None = None, mode: str = "auto") -> Iterator[LLMJudge]:
    """An LLM judge for scoring ``run_dir``: its calls go through ``cassette`` (default
    ``RUN_DIR/judge-cassette.sqlite``) in ``mode`` (record, replay, auto); ``llm`` is ``local`` (the
    embedded model, started here unless the mode is replay) or ``MODEL@BASE_URL``. The judge's
    name (what reports print) is the model's identity, the same in record and replay."""
    from webfreeze.llm import Cassette, LLMClient, LLMError
    from webfreeze.llm.local import LOCAL_MODEL_ID, LocalModelServer, resolve_local

    config = _config(llm, key_env)
    path = Path(cassette) if cassette else Path(run_dir) / JUDGE_CASSETTE
    name = f"llm judge ({LOCAL_MODEL_ID if llm == 'local' else config.model}, temperature 0)"
    server = None
    try:
        if llm == "local" and mode != "replay":
            server = LocalModelServer(log_path=Path(run_dir) / "judge-model.log")
            server.start()
        config = resolve_local(config, server.base_url if server else None)
        with Cassette(path, mode) as tape, LLMClient(config, tape) as client:
            yield LLMJudge(client, name)
    except LLMError as exc:
        raise ReportError(f"LLM judge: {exc}") from None
    finally:
        if server is not None:
            server.stop()
