"""Run AgentLab's GenericAgent, unmodified, on demo tasks through our Gymnasium registration, the
way AgentLab's own studies run one: the agent is told the benchmark (``set_benchmark``: its action
set), then each task is an ``ExpArgs(agent_args, env_args).run()``.

Run by tests/test_agentlab.py in a process of its own, with AgentLab on PYTHONPATH and
OPENAI_BASE_URL naming the test's OpenAI-compatible server. Usage:
``agentlab_driver.py RUN_DIR EXP_ROOT BACKEND MAX_STEPS TASK_ID...``; prints one JSON line per task.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from agentlab.agents.generic_agent import AGENT_3_5
from browsergym.experiments.loop import ExpArgs

from webfreeze.browsergym import agentlab_benchmark


def main(argv: list[str]) -> int:
    run_dir, exp_root, backend, max_steps, *tasks = argv
    Path(exp_root).mkdir(parents=True, exist_ok=True)
    benchmark = agentlab_benchmark("demo", tasks=tasks, max_steps=int(max_steps), backend=backend,
                                   record_to=run_dir, agent="agentlab-GenericAgent")
    agent_args = AGENT_3_5  # AgentLab's own GenericAgent configuration, as shipped
    agent_args.set_benchmark(benchmark, demo_mode=False)
    agent_args.prepare()
    try:
        for env_args in benchmark.env_args_list:
            exp = ExpArgs(agent_args=agent_args, env_args=env_args, enable_debug=False)
            exp.prepare(exp_root)
            exp.run()
            task = env_args.task_name.rsplit(".", 1)[1]
            print(json.dumps({"task": task, "error": exp.err_msg, "exp_dir": str(exp.exp_dir)}), flush=True)
    finally:
        agent_args.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
