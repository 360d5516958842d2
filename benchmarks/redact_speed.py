"""Redaction throughput: ``archive redact`` against ``archive pack`` on the same archive.

Both read every exchange of the demo archive (its shop and booking sessions set cookies, which are
the secrets here) and write a new archive: pack recompresses every blob at zstd level 19, redact
decodes every payload, replaces the secrets (the content coding redone where one changed) and
stores the copy at the fast level. Exchanges per second, best of ``ROUNDS``; the ratio is
redact / pack (higher is better: above 1, redacting costs less than the packing a shared archive
gets anyway).
"""

from __future__ import annotations

import time

from . import Context, Row, console

NAME = "redact_speed"
TITLE = "archive redact vs archive pack on the same archive"
BENCH = "9 redact"
ROUNDS = 2


def run(ctx: Context) -> list[Row]:
    from webfreeze.archives import Archive
    from webfreeze.archives.maintenance import pack
    from webfreeze.archives.redact import redact_archive
    from webfreeze.bundles.redaction import make_redactor
    from webfreeze.demo import ARCHIVE

    with Archive.open(ARCHIVE) as arc:
        exchanges = arc.counts()["exchanges"]
    redact_t, pack_t, secrets = [], [], 0
    for i in range(ROUNDS):
        console.print(f"  round {i + 1}/{ROUNDS}: redact, then pack the demo archive ...")
        out = ctx.fresh_path(f"redact-{i}.wfz")
        t0 = time.perf_counter()
        r = make_redactor(ARCHIVE)  # (finding the secrets is part of the job)
        redact_archive(ARCHIVE, out, r)
        redact_t.append(time.perf_counter() - t0)
        secrets = r.count
        out = ctx.fresh_path(f"pack-{i}.wfz")
        t0 = time.perf_counter()
        pack(ARCHIVE, out)
        pack_t.append(time.perf_counter() - t0)
    ctx.details[NAME] = {"exchanges": exchanges, "secrets": secrets, "redact_s": redact_t, "pack_s": pack_t}
    return [Row(BENCH, f"archive redact, demo archive ({exchanges} exchanges, {secrets} secrets)",
                exchanges / min(redact_t), exchanges / min(pack_t), "archive pack", "exchanges/s", "higher",
                note="same input, each writing a new archive")]
