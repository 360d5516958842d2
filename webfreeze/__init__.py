"""webfreeze: record, replay and benchmark web agents on frozen websites."""

from importlib.metadata import PackageNotFoundError, version as _version

try:
    __version__ = _version("webfreeze")
except PackageNotFoundError:  # running from a source tree that was never installed
    __version__ = "0.0.0+unknown"
