"""Sharing without secrets: redaction of an archive, its suite and LLM cassettes with one mapping,
and the credential check that ``bundle pack``, ``archive export`` and ``archive pack -o`` make
before they write anything (docs/bundles.md, "Sharing without secrets").

The secrets and their placeholders live in one :class:`~webfreeze.archives.redact.Redactor` for
one command: its key is random and never stored, so the placeholders match across the archive, the
suite and the cassettes redacted together, and nowhere else.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from urllib.parse import urlsplit

import zstandard

from webfreeze.archives import Archive, archive_digest
from webfreeze.archives.errors import ArchiveError
from webfreeze.archives.redact import (
    Redactor,
    collect_archive,
    collect_suite,
    redact_archive,
    redact_in_place,
    redact_suite,
    redact_trajectory,
)
from webfreeze.common.errors import WebfreezeError
from webfreeze.llm.cassette import redact_file
from webfreeze.simulator.trajectory import DOM_ZSTD_LEVEL, dom_path, read_dom

# Host names reserved for testing and documentation (RFC 2606, RFC 6761): no real service answers
# there, so a cookie such a host set is no credential of anyone's. The simulated sites of the demo
# and the tests live under .test; `archive redact` still replaces their cookies.
RESERVED_SUFFIXES = (".test", ".example", ".invalid", ".localhost")
RESERVED_HOSTS = ("localhost", "example.com", "example.net", "example.org")


class SecretsFound(WebfreezeError, RuntimeError):
    """What is about to be shared holds a credential: one line naming what and where."""


def _reserved(url: str) -> bool:
    host = (urlsplit(url).hostname or "").lower().rstrip(".")
    return host in RESERVED_HOSTS or host.endswith(RESERVED_SUFFIXES) or \
        any(host.endswith("." + h) for h in RESERVED_HOSTS)


def archive_findings(archive, *, params=(), headers=()) -> list[tuple[str, str]]:
    """(kind, what and where) of every secret ``archive redact`` would replace in ``archive``
    (the same collection: credential headers, secret parameters, form fields and JSON keys of
    requests and responses, ``Location`` URLs); of the exchanges of reserved test hosts, only what
    a person supplied (:meth:`~webfreeze.archives.redact.Redactor.collect_supplied`)."""
    r = Redactor(params=params, headers=headers)
    with Archive.open(archive) as arc:
        collect_archive(arc, r, skip=_reserved)
    return r.findings()


def archive_credentials(archive, shown=None) -> str | None:
    """The first secret archive ``archive`` holds that ``archive redact`` would replace, as ``what,
    where``; or None. ``shown``: the name the message gives the archive (a copy of the user's file
    is named as that file)."""
    found = archive_findings(archive)
    return f"{found[0][1]} (archive {shown or archive})" if found else None


def trajectory_findings(paths) -> list[tuple[str, str]]:
    """(kind, what and where) of each value typed into a password field in the trajectory files."""
    out = []
    for p in paths:
        r = Redactor()
        try:
            r.collect_trajectory(json.loads(Path(p).read_text(encoding="utf-8")), str(p))
        except (OSError, ValueError):
            continue
        out += r.findings()
    return out


def trajectory_credentials(paths) -> str | None:
    """The first value typed into a password field in the trajectory files ``paths``, as
    ``what, where``; or None."""
    found = trajectory_findings(paths)
    return found[0][1] if found else None


def check_shareable(*, archives=(), trajectories=(), what: str = "this", shown=None) -> None:
    """Refuse (one line naming the first finding) when an archive or a trajectory to be shared holds
    a secret that redaction would replace; the caller skips this with ``--allow-secrets``.
    ``shown``: {archive path: the name to give it}, for copies made on the way."""
    for a in archives:
        found = archive_credentials(a, (shown or {}).get(a))
        if found:
            raise SecretsFound(f"refused: {what} would share {found}; redact it first (webfreeze archive redact, "
                               f"bundle pack --redact) or give --allow-secrets")
    found = trajectory_credentials(trajectories)
    if found:
        raise SecretsFound(f"refused: {what} would share {found}; redact it first (webfreeze archive redact "
                           f"--suite, bundle pack --redact) or give --allow-secrets")


def suite_trajectories(suite_dir) -> list[Path]:
    """A suite folder's reference trajectories."""
    refs = Path(suite_dir) / "references"
    return sorted(refs.rglob("*.json")) if refs.is_dir() else []


MIN_GIVEN = 4  # a --secret-env value is replaced wherever it occurs: not a two-letter string


def secret_env_values(names) -> list[tuple[str, str]]:
    """(name, value) of each ``--secret-env NAME``: the environment variable must be set, with a
    value of at least :data:`MIN_GIVEN` characters (it is replaced wherever it occurs)."""
    out = []
    for name in names or ():
        value = os.environ.get(name)
        if not value:
            raise ArchiveError(f"--secret-env {name}: the environment variable {name} is not set or empty")
        if len(value) < MIN_GIVEN:
            raise ArchiveError(f"--secret-env {name}: its value is shorter than {MIN_GIVEN} characters; "
                               f"it would be replaced in every place it occurs by chance")
        out.append((name, value))
    return out


def make_redactor(archive, *, suite=None, params=(), headers=(), trajectories=(), secret_env=()):
    """A redactor holding every secret of ``archive``, of ``suite``'s references, of the trajectory
    files given and the values of the environment variables ``secret_env`` names."""
    r = Redactor(params=params, headers=headers)
    for name, value in secret_env_values(secret_env):
        r.add_given(value, name)
    if suite is not None:
        collect_suite(suite, r)
    for p in trajectories:
        try:
            r.collect_trajectory(json.loads(Path(p).read_text(encoding="utf-8")))
        except (OSError, ValueError):
            continue
    with Archive.open(archive) as arc:
        collect_archive(arc, r)
    return r


def redact(archive, out, *, suite=None, suite_out=None, params=(), headers=(), cassettes=(), secret_env=(),
           progress=None) -> dict:
    """``archive redact``: the redacted archive at ``out``; with ``suite`` its redacted copy at
    ``suite_out`` (naming the new archive and its digest); each ``(src, dest)`` cassette redacted with
    the same mapping. Everything is checked before anything is written; outputs appear complete or
    not at all (a failure removes those already written by this call)."""

    if (suite is None) != (suite_out is None):
        raise ArchiveError("--suite and --suite-out go together")
    for p in [out, suite_out, *(d for _, d in cassettes)]:
        if p is not None and Path(p).exists():
            raise ArchiveError(f"{p}: already exists")
    if suite is not None and not (Path(suite) / "tasks.jsonl").is_file():
        raise ArchiveError(f"{suite}: not a suite folder (no tasks.jsonl)")
    for src, _ in cassettes:
        if not Path(src).is_file():
            raise ArchiveError(f"{src}: no such cassette")
    r = make_redactor(archive, suite=suite, params=params, headers=headers, secret_env=secret_env)
    written: list[Path] = []
    try:
        summary = redact_archive(archive, out, r, progress=progress)
        written.append(Path(out))
        digest = archive_digest(out)
        summary["digest"] = digest
        if suite is not None:
            summary["suite_files"] = redact_suite(suite, suite_out, r, archive_out=out, archive_digest=digest)
            written.append(Path(suite_out))
        summary["cassettes"] = []
        for src, dest in cassettes:
            stats = redact_file(src, dest, r.cassette_text)
            written.append(Path(dest))
            summary["cassettes"].append({"src": str(src), "out": str(dest), "calls": stats["calls"],
                                         "changed": stats["changed"]})
    except BaseException:
        for p in written:
            shutil.rmtree(p, ignore_errors=True) if p.is_dir() else p.unlink(missing_ok=True)
        raise
    summary["given_not_found"] = r.given_not_found()  # (nor in the suite or the cassettes)
    summary["redactor"] = r
    return summary


def redact_cassette(cassette, out, *, archive, suite=None, params=(), headers=(), secret_env=()) -> dict:
    """``cassette redact``: the secrets of ``archive`` (and ``suite``'s references) replaced in a
    cassette. Its placeholders match an archive redaction only when made in the same command
    (``archive redact --cassette``, ``bundle pack --redact``): the key is never kept."""
    r = make_redactor(archive, suite=suite, params=params, headers=headers, secret_env=secret_env)
    stats = redact_file(cassette, out, r.cassette_text)
    return {"calls": stats["calls"], "changed": stats["changed"], "secrets": r.count}


# ==================================================================================== bundles
def redact_text_file(r, src: Path, dest: Path, replace: dict, keys: dict, trajectory: bool) -> None:
    """A run's text file ``src`` redacted by ``r`` into ``dest``: digests in ``replace`` swapped for
    their redacted files' ones, cassette ``keys`` renamed, a trajectory redacted as a trajectory."""
    def fix(text: str) -> str:
        for old, new in replace.items():
            text = text.replace(old, new)
        return text

    def value_of(v):
        v = redact_trajectory(r, v) if trajectory and isinstance(v, dict) else r.json_value(v)
        if isinstance(v, dict) and isinstance(v.get("llm_entries"), list):
            # (sorted as the cassette lists what an episode used: take_used; the renamed keys sort
            # otherwise than the old ones, and a re-run on the redacted cassette lists them so)
            v["llm_entries"] = sorted([keys.get(k, k), n] for k, n in v["llm_entries"])
        for step in (v.get("steps") or []) if isinstance(v, dict) else []:
            # (each step names the cassette keys of its own calls, in the order it made them)
            llm = ((step or {}).get("agent_fields") or {}).get("llm") if isinstance(step, dict) else None
            if isinstance(llm, dict) and isinstance(llm.get("keys"), list):
                llm["keys"] = [keys.get(k, k) if isinstance(k, str) else k for k in llm["keys"]]
        return v

    dest.parent.mkdir(parents=True, exist_ok=True)
    if src.suffix == ".json":
        text = json.dumps(value_of(json.loads(src.read_text(encoding="utf-8"))), indent=1, ensure_ascii=False)
        dest.write_text(fix(text) + "\n", encoding="utf-8")
    elif src.suffix == ".jsonl":
        lines = [fix(json.dumps(value_of(json.loads(line)), ensure_ascii=False, sort_keys=True)) if line.strip()
                 else line for line in src.read_text(encoding="utf-8").splitlines()]
        dest.write_text("\n".join(lines) + "\n", encoding="utf-8")
    elif src.suffix in (".png", ".jpg", ".jpeg", ".webp"):
        dest.write_bytes(src.read_bytes())
    else:
        data = r.data(src.read_bytes())
        for old, new in replace.items():
            data = data.replace(old.encode(), new.encode())
        dest.write_bytes(data)


def redact_doms(r, src: Path, dest: Path) -> dict:
    """A run's DOM snapshots (``dom/<sha256 of the HTML>.html.zst``) redacted, each named by its new
    HTML's digest as the environment names them; returns old path -> new path (run-relative)."""

    renamed = {}
    dest.mkdir(parents=True, exist_ok=True)
    for f in sorted(src.glob("*.html.zst")):
        html = r.data(read_dom(f))
        new = dom_path(html)
        (dest.parent / new).write_bytes(zstandard.ZstdCompressor(level=DOM_ZSTD_LEVEL).compress(html))
        old = f"dom/{f.name}"
        if old != new:
            renamed[old] = new
    return renamed


def redact_recording(archive, trajectories=(), *, params=(), headers=(), secret_env=()) -> dict:
    """``record session|crawl --redact``: the archive just recorded replaced by its redacted copy and
    each reference trajectory file rewritten with the same mapping (a post-pass: the recorder itself
    stores what it saw)."""
    r = make_redactor(archive, params=params, headers=headers, trajectories=trajectories, secret_env=secret_env)
    summary = redact_in_place(archive, r)
    for p in trajectories:
        p = Path(p)
        value = redact_trajectory(r, json.loads(p.read_text(encoding="utf-8")))
        tmp = p.with_name(f".{p.name}.partial")
        tmp.write_text(json.dumps(value, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
        tmp.replace(p)
    summary["given_not_found"] = r.given_not_found()
    return summary
