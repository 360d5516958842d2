"""A tour of the archive tools end to end on real WARCs (pywb's sample archive); ``make demo``
ran it before the benchmark runner existed.

Each step prints the command a user would type, then its output, so the demo doubles as a tour.
"""

from __future__ import annotations

import shlex
import shutil
import subprocess
import sys
from pathlib import Path

from webfreeze.samples import SamplesUnavailable, pywb_sample_archive

OUT = Path("demo-out")


def step(title: str, *args: str, check: bool = True) -> None:
    print(f"\n== {title}\n$ webfreeze {' '.join(shlex.quote(a) for a in args)}", flush=True)
    proc = subprocess.run([sys.executable, "-m", "webfreeze", *args])
    if check and proc.returncode != 0:
        print(f"demo: step failed with exit status {proc.returncode}", file=sys.stderr)
        sys.exit(proc.returncode)


def main() -> None:
    try:
        samples = pywb_sample_archive() / "warcs"
    except SamplesUnavailable as exc:
        print(f"demo: {exc}", file=sys.stderr)
        sys.exit(1)
    if OUT.exists():
        shutil.rmtree(OUT)
    OUT.mkdir()
    arc = str(OUT / "iana.wfz")
    warcs = [str(samples / n) for n in ("iana.warc.gz", "dupes.warc.gz", "post-test.warc.gz", "example.warc.gz")]
    step("Import four real WARCs (revisits and POSTs included) into one archive",
         "archive", "import", *warcs, "--to", arc, "--description", "pywb sample crawls")
    step("What is in it: counts, dedup, hosts, time range", "archive", "info", arc)
    step("List the images", "archive", "ls", arc, "--mime", "image/*", "--limit", "5")
    step("The POST captures, matched by their request bodies", "archive", "ls", arc, "--method", "POST", "--json")
    step("One capture, headers only", "archive", "show", arc, "http://www.iana.org/_css/2013.1/print.css",
         "--headers-only")
    step("Recompute every digest", "archive", "verify", arc)
    step("Export as WARC 1.1 for warcio and pywb", "archive", "export", arc, "--format", "warc",
         "-o", str(OUT / "iana.warc.gz"))
    step("Export as WACZ for sharing", "archive", "export", arc, "--format", "wacz", "-o", str(OUT / "iana.wacz"))
    step("Import the WACZ back (hashes checked)", "archive", "import", str(OUT / "iana.wacz"),
         "--to", str(OUT / "roundtrip.wfz"))
    step("The round trip changed nothing", "archive", "diff", arc, str(OUT / "roundtrip.wfz"), "--exit-code")
    step("Pack it for sharing (zstd 19, deltas between similar payloads)", "archive", "pack", arc,
         "-o", str(OUT / "iana-packed.wfz"))
    cut = OUT / "truncated.warc.gz"
    data = (samples / "iana.warc.gz").read_bytes()
    cut.write_bytes(data[: len(data) // 2])
    step("Damaged input (a WARC cut in half) is refused in one line, and nothing is written", "archive", "import",
         str(cut), "--to", str(OUT / "bad.wfz"), check=False)
    print(f"\nDemo finished; files are in {OUT}/")


if __name__ == "__main__":
    main()
