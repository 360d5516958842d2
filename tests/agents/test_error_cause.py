"""Who stopped an AgentLab episode, read off AgentLab's ``err_msg`` (``webfreeze.browsergym.error_cause``):
the agent's own error or infrastructure (a provider, the network, a download). The episodes
themselves, for real, are in test_agentlab_causes.py; here, the rule over the texts AgentLab and
the libraries under it write."""

from __future__ import annotations

import pytest

from webfreeze.browsergym import error_cause


def uncaught(name: str, message: str) -> str:
    """AgentLab's err_msg for an exception its loop caught (browsergym.experiments.loop)."""
    return f"Exception uncaught by agent or environment in task webfreeze.demo.t.\n{name}:\n{message}"


def api_retries(last: str) -> str:
    """agentlab.llm.chat_api's RetryError, every try of an API call failed."""
    return uncaught("RetryError", f"Failed to get a response from the API after 4 retries\nLast error: {last}")


PROXY_502 = ("Error code: 502 - {'error': {'code': 'upstream_error', 'message': 'upstream http://127.0.0.1:9/v1 "
             "failed %s', 'param': None, 'type': 'upstream_error'}}")


@pytest.mark.parametrize("err_msg, cause", [
    # behind our cassette proxy: a provider unreachable, or refusing what it does not retry
    (api_retries(PROXY_502 % "after 4 attempts: cannot connect: [Errno -2] Name or service not known"), "provider"),
    (api_retries(PROXY_502 % "after 4 attempts: HTTP 503: overloaded"), "provider"),
    (api_retries(PROXY_502 % "(not retried): HTTP 400: context_length_exceeded"), "agent"),
    (api_retries(PROXY_502 % "(not retried): HTTP 401: bad key"), "provider"),
    # a provider straight
    (api_retries("Error code: 429 - {'error': {'code': 'rate_limit_exceeded'}}"), "provider"),
    (api_retries("Error code: 402 - {'error': {'message': 'insufficient credits'}}"), "provider"),
    (api_retries("Connection error."), "provider"),
    (api_retries("Error code: 400 - {'error': {'code': 'context_length_exceeded'}}"), "agent"),
    (api_retries("Error code: 404 - {'error': {'code': 'model_not_found'}}"), "agent"),
    (api_retries("Error code: 422 - {'error': {'code': 'cassette_miss'}}"), "agent"),
    # litellm's names (AgentLab's LiteLLMChatModel), no status in the text
    (api_retries("litellm.ContextWindowExceededError: the prompt is too long"), "agent"),
    (api_retries("litellm.BadRequestError: OpenAIException - invalid message"), "agent"),
    # a status elsewhere in the text is not the last error's
    (uncaught("RetryError", "Failed to get a response from the API after 2 retries (Error code: 400 seen first)\n"
                            "Last error: Error code: 503 - overloaded"), "provider"),
    # another library's RetryError (tenacity's, around an agent's own retries) is the agent's
    (uncaught("RetryError", "RetryError[<Future at 0x7f state=finished raised ParseError>]"), "agent"),
    # named errors of the network and providers, as before
    (uncaught("APIConnectionError", "Connection error."), "provider"),
    (uncaught("ValueError", "could not parse the model's answer"), "agent"),
])
def test_the_cause_is_read_off_the_last_error(err_msg, cause):
    assert error_cause(err_msg) == cause
