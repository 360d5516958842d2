"""Agent policies, LLM backends, memory and user-history retrieval. Built in a later issue."""
