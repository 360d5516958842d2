"""Live runs: a benchmark run that records itself (``--live``), and patching misses (``--patch-from-live``).

The orchestration side of :mod:`webfreeze.simulator.live`. The runner calls these few public
functions at marked places (prepare, execute, the worker, play_episode):

- :func:`check_options` refuses incoherent settings in one line before anything is written;
- :func:`mark_manifest` gives a recording run's manifest its archive digest (None until sealed, or
  the one a resumed live run pinned);
- :func:`live_session` starts the recording proxy (recorder/live.py) for the whole run and gives
  the archive the workers replay and the ``upstream`` settings their environments take;
- :func:`episode_failure` turns the site failures of an episode (DNS, TLS, refused, timed out,
  5xx documents) into the episode's infrastructure error (``cause: site``, retried on resume);
- :func:`seal` pins the recorded (or patched) archive's digest in the manifest and in every
  trajectory, and says in ``circumstances.live`` how the run went live (mode, archive, digest,
  live fetches, site failures; when patching, the live answers that were errors): a
  circumstance, so that the live run's report is byte for byte its offline re-run's (timings
  aside).

A live run records into ``--record-into`` (default ``RUN_DIR/live.wfz``), one capture session per
episode; the strict offline re-run of the same suite, agent and cassette on that archive gives the
same trajectories and report (timings aside). Patching copies the input archive to
``--record-into`` (default ``RUN_DIR/patched.wfz``; the input file is never written), replays the
copy, and fetches what it cannot answer live through the recorder into the copy; those answers are
labelled ``live`` in the trajectories' provenance. docs/live.md says it for users.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from pathlib import Path

from webfreeze.archives import ArchiveError, archive_digest, merge
from webfreeze.common.errors import WebfreezeError
from webfreeze.common.files import write_json
from webfreeze.eval.infrastructure import SITE_CAUSE  # an episode ended by the live site failing: retried on resume
from webfreeze.recorder.errors import ProxyError
from webfreeze.simulator.trajectory import write_trajectory

LIVE_ARCHIVE = "live.wfz"
PATCHED_ARCHIVE = "patched.wfz"


class LiveError(WebfreezeError, RuntimeError):
    """A live run that cannot start: one line for the user."""


def is_live(options) -> bool:
    """Whether a run's options make it live (recording itself) or patching misses live."""
    return bool(getattr(options, "live", False) or getattr(options, "patch_from_live", False))


def check_options(spec, options) -> None:
    """Refuse, in one line, settings that do not go together with ``--live`` or
    ``--patch-from-live`` (or those options without them)."""
    config = options  # (the archive is the spec's)
    live, patch = bool(config.live), bool(config.patch_from_live)
    if not live and not patch:
        if config.record_into:
            raise LiveError("--record-into needs --live or --patch-from-live")
        if config.resolve:
            raise LiveError("--resolve needs --live or --patch-from-live (no other run reaches a site)")
        if config.http_credentials:
            raise LiveError("--http-credentials needs --live or --patch-from-live (a replay asks for no password)")
        return
    if config.http_credentials and spec.backend == "text":
        raise LiveError("--http-credentials needs the browser backend (the text backend answers no authentication)")
    if live and patch:
        raise LiveError("--live and --patch-from-live do not go together: --live records every page, "
                        "--patch-from-live only what the archive misses")
    if live and spec.archive:
        raise LiveError("--live records its own archive (--record-into); --archive names one to replay: "
                        "give one or the other")
    if config.executor != "local":
        raise LiveError("--live and --patch-from-live run on the local executor only (the recording proxy "
                        "listens on this machine's loopback)")
    if live and config.cassette_mode == "replay" and not _cassette_of_live_run(config.cassette):
        raise LiveError("--live with --cassette-mode replay: the cassette's answers were recorded on other pages "
                        "than the live sites will show; use --cassette-mode record or auto (or replay the "
                        "cassette of a live run)")
    target = Path(config.record_into) if config.record_into else None
    if target is not None and target.exists() and target.is_dir():
        raise LiveError(f"--record-into {target}: is a directory, not an archive file")
    if patch and target is not None and spec.archive and target.resolve() == Path(spec.archive).resolve():
        raise LiveError(f"--record-into {target}: patching never writes its input archive; name a new file")


def _cassette_of_live_run(cassette: str | None) -> bool:
    """Whether ``cassette`` lies in the folder of a live run (its manifest says so): the one case
    in which a live run may replay LLM answers strictly (the same pages, the same calls)."""
    if not cassette:
        return False
    manifest = Path(cassette).parent / "manifest.json"
    try:
        circumstances = json.loads(manifest.read_text(encoding="utf-8")).get("circumstances") or {}
        return (circumstances.get("live") or {}).get("mode") == "record"
    except (OSError, ValueError, AttributeError):
        return False


def record_path(options) -> Path:
    """The archive a live run records into, or a patching run patches: ``--record-into``, else
    ``RUN_DIR/live.wfz`` or ``RUN_DIR/patched.wfz``."""
    if options.record_into:
        return Path(options.record_into)
    return Path(options.out) / (LIVE_ARCHIVE if options.live else PATCHED_ARCHIVE)


def mark_manifest(manifest: dict, options) -> None:
    """Prepare's manifest of a live run. What the run did stays comparable with its offline re-run
    (the archive's digest, pinned by :func:`seal`); that it went live is a circumstance, as how a
    run got its LLM answers is (``circumstances.live``, written by :func:`seal`). A recording run's
    archive does not exist yet: its digest is None, or, when the run folder holds this live run
    already (a resume), the digest it pinned then."""
    if not options.live:
        return
    manifest["archive"] = {"digest": _resumed_digest(Path(options.out))}
    manifest["archive_matches_suite"] = None


def _resumed_digest(out: Path) -> str | None:
    """The archive digest a live run in ``out`` pinned, or None (no run there, or not a live one)."""
    try:
        old = json.loads((out / "manifest.json").read_text(encoding="utf-8"))
        if ((old.get("circumstances") or {}).get("live") or {}).get("mode") == "record":
            return (old.get("archive") or {}).get("digest")
    except (OSError, ValueError, AttributeError):
        pass
    return None


@contextlib.contextmanager
def live_session(options, archive: Path) -> Iterator[tuple[Path, dict]]:
    """For the run: start the recording proxy into :func:`record_path` (for patching, first copy the
    input ``archive`` there, once) and yield (the archive the workers replay, the ``upstream``
    settings of their environments). The proxy stops, and every episode's capture session is ended,
    when the block ends."""
    # (late: mitmproxy, the optional recording extra, is loaded only by a live run)
    from webfreeze.recorder.live import live_ca_file, live_proxy

    target = record_path(options)
    if options.patch_from_live and not target.exists():
        try:
            merge([archive], target)  # a copy: the input file is only read
        except ArchiveError as exc:
            raise LiveError(f"cannot copy {archive} to {target} for patching: {exc}") from None
    try:
        with live_proxy(target, resolve=dict(options.resolve or {})) as proxy:
            upstream: dict[str, object] = {"proxy": proxy.url, "ca_file": live_ca_file(), "mode": "live" if options.live else "miss"}
            if options.http_credentials:  # (to the workers' browsers, in memory: no file holds it)
                user, password = options.http_credentials
                upstream["http_credentials"] = {"username": user, "password": password}
            yield target, upstream
    except (ProxyError, ArchiveError) as exc:
        raise LiveError(f"the live run's recording proxy failed: {exc}") from None


def episode_failure(failures: list[dict]) -> str | None:
    """The episode's error detail when the live site failed for one of its documents (None when
    none did): the first failure, with its cause, and how many more."""
    if not failures:
        return None
    first = failures[0]
    more = f" (and {len(failures) - 1} more)" if len(failures) > 1 else ""
    return f"the live site failed: {first['method']} {first['url']}: {first['cause']}{more}"


def live_fetches(trajectory: dict, mode: str) -> int:
    """How many of an episode's answers came from the live site: in a recording run every answer,
    when patching those its provenance labels ``live``."""
    requests = (trajectory.get("replay") or {}).get("requests") or {}
    if mode == "record":
        return sum(n for by_level in requests.values() for n in by_level.values())
    return sum(by_level.get("live", 0) for by_level in requests.values())


def live_errors(trajectory: dict) -> list[str]:
    """The answers of an episode fetched live (when patching) that were errors, status >= 400:
    ``"404 GET URL"`` each, in the order the episode got them (its start, then its steps)."""
    replay = trajectory.get("replay") if isinstance(trajectory.get("replay"), dict) else {}
    start = replay.get("start") if isinstance(replay.get("start"), dict) else {}
    lists = [start.get("answers")] + [(s.get("replay") or {}).get("answers") for s in trajectory.get("steps") or []
                                      if isinstance(s, dict)]
    return [f"{a.get('status')} {a.get('method')} {a.get('url')}" for answers in lists if isinstance(answers, list)
            for a in answers if isinstance(a, dict) and a.get("level") == "live"
            and isinstance(a.get("status"), int) and a["status"] >= 400]


def live_error_warning(run_dir) -> str | None:
    """One line for a run (its folder) that patched misses with the live site's errors (a page or a
    script the site no longer has, as a later build names its files otherwise): how many, the
    first, and what it means; None when none were (or the run did not patch). Printed by
    ``bench run`` and ``eval report``."""
    try:
        manifest = json.loads((Path(run_dir) / "manifest.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    live = ((manifest.get("circumstances") or {}).get("live") or {}) if isinstance(manifest, dict) else {}
    count = live.get("live_errors") if isinstance(live, dict) else None
    if not isinstance(count, int) or count <= 0:
        return None
    return (f"{count} answer(s) fetched live to patch the archive's misses were errors (e.g. "
            f"{live.get('live_error_example')}): the live site no longer has what the archive lacks, and "
            f"{live.get('archive')} now holds those errors as the site's answers")


def run_live(prep, run):
    """Execute a prepared live run: ``run()`` (the runner's own execution, returning the manifest)
    inside :func:`live_session`, the workers replaying the recorded or patched archive through the
    proxy; then :func:`seal`, also after a failure or an interruption (what ran stays sealed)."""
    options, out = prep.options, Path(prep.options.out)
    out.mkdir(parents=True, exist_ok=True)  # (the default archive lies in the run folder)
    ids = [t.id for t in prep.suite.tasks]
    manifest = None
    try:
        with live_session(options, prep.archive) as (archive, upstream):
            prep.archive, options.upstream = archive, upstream
            manifest = run()
    finally:
        path = out / "manifest.json"
        try:
            sealed = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None
        except (OSError, ValueError):
            sealed = None
        if sealed is not None:
            seal(sealed, out, options, ids, getattr(prep.suite, "archive_digest", None))
            write_json(path, sealed)
            manifest = sealed
    return manifest


def seal(manifest: dict, out: Path, options, task_ids: list[str], suite_archive: str | None = None) -> None:
    """After the run: pin the recorded (or patched) archive's digest in every trajectory's
    ``env.archive_digest`` (each episode saw the archive still growing) and, for a recording run, in
    the manifest's ``archive`` (with ``archive_matches_suite`` against ``suite_archive``), so that
    the run's files are those of a run on that archive; and say in ``circumstances.live`` how the
    run went live: its mode, the archive, its digest, the live fetches and the site failures (and,
    when patching, how many live answers were errors, with the first: :func:`live_error_warning`)."""
    target = record_path(options)
    if not target.is_file():
        return
    digest = archive_digest(target)
    mode = "record" if options.live else "patch"
    fetches = failures = 0
    errors: list[str] = []
    for tid in task_ids:
        path = Path(out) / "trajectories" / f"{tid}.json"
        if not path.is_file():
            continue
        try:
            trajectory = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        fetches += live_fetches(trajectory, mode)
        if mode == "patch":
            errors += live_errors(trajectory)
        failures += (trajectory.get("end") or {}).get("cause") == SITE_CAUSE
        env = trajectory.get("env")
        if isinstance(env, dict) and env.get("archive_digest") != digest:
            env["archive_digest"] = digest
            write_trajectory(trajectory, out)  # (the bytes write_trajectory writes, as the offline run's)
    if mode == "record":
        manifest["archive"] = {"digest": digest}
        manifest["archive_matches_suite"] = None if not suite_archive else suite_archive == digest
    circumstances = manifest.setdefault("circumstances", {})
    circumstances["live"] = {"mode": mode, "archive": _relative(target, out), "digest": digest,
                             "live_fetches": fetches, "site_failures": failures}
    if errors:  # (patching: the live answers that were errors, see live_error_warning)
        circumstances["live"].update(live_errors=len(errors), live_error_example=errors[0])


def _relative(path: Path, out: Path) -> str:
    """``path`` relative to the run folder when inside it, else absolute (as manifests keep paths)."""
    target, root = Path(path).resolve(), Path(out).resolve()
    try:
        return target.relative_to(root).as_posix()
    except ValueError:
        return str(target)
