"""What the runner lends an agent: LLM clients bound to the run's cassette.

Every LLM call of a run goes through one cassette (``RUN_DIR/llm-cassette.sqlite`` unless
``--cassette`` names another), in the run's mode (record, replay, auto); a client for the embedded
local model (``model="local"``) talks to the server the run started. Outside a runner an agent
builds :class:`AgentServices` itself (the LLM agent: with a temporary cassette, unless it was given
services naming one), so that its calls go through a cassette there too.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class AgentServices:
    cassette: str | None = None          # the cassette file; None: calls are not stored
    cassette_mode: str = "record"
    local_base_url: str | None = None    # where the run's local model server listens (None: not started)
    slots_dir: str | None = None         # lock files limiting concurrent LLM calls across workers
    concurrency: int | None = None       # that limit (None: the client config's own)
    _cassette: object = field(default=None, repr=False)
    _clients: list = field(default_factory=list, repr=False)

    def open_cassette(self):
        """The run's :class:`~webfreeze.llm.Cassette` (opened once per worker), or None."""
        if self.cassette is None:
            return None
        if self._cassette is None:
            from webfreeze.llm import Cassette

            self._cassette = Cassette(self.cassette, self.cassette_mode)
        return self._cassette

    def llm(self, config):
        """An :class:`~webfreeze.llm.LLMClient` for ``config`` (an ``LLMConfig`` or its dict) that goes
        through the run's cassette; model ``local`` is sent to the run's local server."""
        from dataclasses import replace

        from webfreeze.llm import LLMClient, LLMConfig
        from webfreeze.llm.local import resolve_local

        if isinstance(config, dict):
            config = LLMConfig.from_dict(config)
        if self.concurrency:
            config = replace(config, concurrency=self.concurrency)
        config = resolve_local(config, self.local_base_url)
        client = LLMClient(config, self.open_cassette(), slots_dir=self.slots_dir)
        self._clients.append(client)
        return client

    def close(self) -> None:
        for client in self._clients:
            close = getattr(client, "close", None)
            if close:
                close()
        self._clients.clear()
        if self._cassette is not None:
            close = getattr(self._cassette, "close", None)
            if close:
                close()
            self._cassette = None
