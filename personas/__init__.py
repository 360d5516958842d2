"""User histories for personalised agents (the Persona2Web shape): the format and its loader, the
generator of deterministic personas from the simulated sites' catalogues, personalised task suites,
and retrieval over a user's history (embeddings + FAISS, cached on disk).

This stage may import ``common`` helpers, ``simulator`` (the sites' catalogues) and
``llm.embeddings`` (the offline embedding models); the environment reaches a user's history through
an object it is handed (``search(query)``), never by importing this package.
"""
