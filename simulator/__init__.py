"""The agent environment over replayed archives and the simulated live sites. Built in a later issue."""
