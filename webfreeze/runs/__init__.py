"""Runs: a suite, an archive and an agent -> a run folder.

``spec`` (the run's settings and shared names), ``prepare`` (every check, the manifest's identity),
``worker`` (one environment and one agent playing episodes), ``execute`` (the run folder and the
manifest; :func:`webfreeze.runs.execute.run` is ``webfreeze.run``), ``executors`` (local) and
``ray`` (Ray), ``context`` (long-context composition), ``compare`` (two runs side by side).
"""
