"""Processes that cannot reach the network: what a bundle's re-run must be able to do without."""

from __future__ import annotations

import os
import shutil
import subprocess


def offline_prefix() -> tuple[list, str]:
    """A command prefix that runs a process with no network but loopback (a new network namespace,
    `unshare -n`, when this machine allows it), and how the network was cut."""
    if shutil.which("unshare") and shutil.which("ip"):
        probe = subprocess.run(["unshare", "-n", "sh", "-c", "ip link set lo up"], capture_output=True)
        if probe.returncode == 0:
            return ["unshare", "-n", "sh", "-c", 'ip link set lo up && exec "$0" "$@"'], "unshare -n"
    return [], "proxies to a closed port"


def offline_env() -> dict:
    """No API key of any kind, and (a second fence) every proxy variable pointing at a closed port."""
    env = {k: v for k, v in os.environ.items() if "KEY" not in k.upper() and "TOKEN" not in k.upper()}
    for var in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        env[var] = "http://127.0.0.1:9"
    env["NO_PROXY"] = env["no_proxy"] = "127.0.0.1,localhost"
    return env
