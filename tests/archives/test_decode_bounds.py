"""Content decoding (archives/content.py) is bounded for every coding: a small body whose coding
expands to half a gigabyte is refused having held a chunk of it at a time, never the whole of it
(brotli's binding bounds no single call: the input goes in a little at a time)."""

from __future__ import annotations

import gzip
import subprocess
import sys
import zlib

import brotli
import pytest
import zstandard

from webfreeze.archives.content import DecodedTooLarge, DecodeError, decode_content

PLAIN = b"<html><body>" + b"caf\xc3\xa9 " * 5000 + b"</body></html>"


@pytest.mark.parametrize("enc,body", [
    ("gzip", gzip.compress(PLAIN)), ("x-gzip", gzip.compress(PLAIN)), ("deflate", zlib.compress(PLAIN)),
    ("deflate", zlib.compress(PLAIN)[2:-4]), ("br", brotli.compress(PLAIN)),
    ("zstd", zstandard.ZstdCompressor().compress(PLAIN)), ("identity", PLAIN), ("", PLAIN)])
def test_every_coding_decodes(enc, body):
    assert decode_content(body, enc) == PLAIN


def test_limits_and_corrupt_bodies():
    with pytest.raises(DecodedTooLarge):
        decode_content(brotli.compress(PLAIN), "br", limit=len(PLAIN) - 1)
    assert decode_content(brotli.compress(PLAIN), "br", limit=len(PLAIN)) == PLAIN
    with pytest.raises(DecodeError, match="corrupt"):
        decode_content(b"not gzip", "gzip")
    with pytest.raises(DecodeError, match="unknown content coding"):
        decode_content(PLAIN, "compress")


_PROBE = """
import sys
from webfreeze.archives.content import DecodedTooLarge, decode_content
bomb = sys.stdin.buffer.read()
base = int(open("/proc/self/status").read().split("VmHWM:")[1].split()[0])
try:
    decode_content(bomb, sys.argv[1], limit=64 << 20)
except DecodedTooLarge:
    pass
else:
    raise SystemExit("not refused")
peak = int(open("/proc/self/status").read().split("VmHWM:")[1].split()[0])
print((peak - base) // 1024)
"""


def _bomb(enc: str, zeros: bytes) -> bytes:
    if enc == "br":
        return brotli.compress(zeros, quality=0)
    if enc == "gzip":
        return gzip.compress(zeros, 1)
    return zstandard.ZstdCompressor(level=1).compress(zeros)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads the peak RSS from /proc")
@pytest.mark.parametrize("enc", ["br", "gzip", "zstd"])
def test_a_bomb_is_refused_in_bounded_memory(enc):
    bomb = _bomb(enc, bytes(512 << 20))
    r = subprocess.run([sys.executable, "-c", _PROBE, enc], input=bomb, capture_output=True, timeout=300)
    assert r.returncode == 0, r.stderr.decode()[-2000:]
    grew_mb = int(r.stdout)
    assert grew_mb < 128, f"decoding a {len(bomb)}-byte {enc} bomb grew the process by {grew_mb} MB"


def test_brotli_is_decoded_with_googles_binding_when_installed():
    """brotlipy (pywb's) takes the name ``brotli``; Google's binding beside it is still the one used:
    several times faster per call, and from Brotli 1.2 it bounds each call's output itself."""
    import importlib.metadata

    from webfreeze.archives.content import _brotli_decompressor

    try:
        importlib.metadata.version("Brotli")
    except importlib.metadata.PackageNotFoundError:
        pytest.skip("Google's Brotli is not installed")
    d, google = _brotli_decompressor()
    assert google and hasattr(d, "process")
    body = PLAIN * 40  # many calls' worth of input
    assert decode_content(brotli.compress(body), "br") == body
