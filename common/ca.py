"""The webfreeze CA: one certificate authority (mitmproxy's store) for recording and replay, so
clients trust a single CA. Here, below the stages, because both the recorder and the replayer use
it and neither may import the other (docs/architecture.md); it is not about archives."""

from __future__ import annotations

import os
from pathlib import Path

from .errors import WebfreezeError

CA_BASENAME = "mitmproxy"


def default_confdir() -> Path:
    """Where the webfreeze CA lives: $WEBFREEZE_HOME/mitmproxy, else ~/.webfreeze/mitmproxy."""
    return Path(os.environ.get("WEBFREEZE_HOME") or Path.home() / ".webfreeze") / "mitmproxy"


def load_ca(confdir: Path):
    """mitmproxy's certificate store in ``confdir``, its CA made on first use; a CA file that
    cannot be read is one line naming the folder."""
    from mitmproxy.certs import CertStore  # the record/replay extras install it

    confdir.mkdir(parents=True, exist_ok=True)
    try:
        return CertStore.from_store(str(confdir), CA_BASENAME, 2048)
    except (ValueError, TypeError, OSError) as exc:
        reason = exc.args[0] if exc.args and isinstance(exc.args[0], str) else str(exc) or type(exc).__name__
        reason = reason.splitlines()[0].split(". ")[0]
        raise WebfreezeError(f"{confdir}: the webfreeze CA there cannot be read or made ({reason}); if it is "
                           "damaged, move the folder away to make a new CA (clients must then trust the new one)") from None
