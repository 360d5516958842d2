"""Benchmark bundles: one file that holds a frozen benchmark and the runs made on it.

A bundle (``NAME.wfb``) is a zip, readable with standard tools, laid out as a WACZ is: a
``datapackage.json`` listing every member with its SHA-256 and size, and a
``datapackage-digest.json`` holding that file's own digest and, optionally, an Ed25519 signature
over it. Members:

- ``archive/<name>.wfz``: the archive, byte for byte as the runs cite it (packed first when the
  bundle holds a suite alone);
- ``suite/``: the task suite (``manifest.json``, ``tasks.jsonl``, references), ground truth included;
- ``runs/<name>/``: each run's folder (manifest, tasks, trajectories, screenshots, report.json and
  report.html) with ``llm-cassette.sqlite`` holding exactly the cassette entries the run used;
- ``personas/``: the persona histories a run names (manifest key ``personas``), when there are any;
- ``context/``: a long-context run's filler pool (``pools/<sha256>.jsonl``) and, when it took
  subtask A1 from another run, that run's manifest, tasks and the A1 trajectories it used
  (``a1/<run>/``), each checked against the digests in the run's manifest.

Already-compressed members (the archive, PNG screenshots) are stored; the rest is deflated. Every
zip entry carries the same fixed timestamp, so packing the same inputs twice gives the same bytes.

Reading is defensive: a bundle comes from another lab. Before anything is extracted, every member
name is checked (no absolute path, no ``..``, no backslash, no link, no duplicate), the zip and the
manifest must list the same members, a member may not be larger than the manifest says nor than
:data:`MAX_MEMBER_BYTES`, and a member that expands more than :data:`MAX_RATIO` times is refused as
a compression bomb. See docs/bundles.md.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import shutil
import stat
import tempfile
import zipfile
import zlib
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from webfreeze import __version__
from webfreeze.archives import ArchiveError, archive_digest
from webfreeze.archives.maintenance import pack as pack_archive
from webfreeze.archives.redact import PLACEHOLDER_PREFIX, PLACEHOLDER_RE, redact_archive, redact_suite, typed_value
from webfreeze.archives.verify import require_intact
from webfreeze.archives.verify import verify as verify_archive
from webfreeze.archives.warc_export import export
from webfreeze.bundles.redaction import SecretsFound, check_shareable, make_redactor, redact_doms, redact_text_file
from webfreeze.common.digests import file_digest
from webfreeze.common.errors import WebfreezeError
from webfreeze.eval.llm_judge import JUDGE_CASSETTE, llm_judge_setting
from webfreeze.eval.tasks import TaskError, load_suite, suite_digest
from webfreeze.llm.cassette import redact_file, verify_file, write_subset
from webfreeze.llm.errors import LLMError
from webfreeze.runs.context import ContextError, a1_trajectory, trajectories_digest
from webfreeze.runs.execute import manifest_path, used_entries
from webfreeze.runs.prepare import agent_source_path, resolve_archive
from webfreeze.runs.spec import RunError

FORMAT = "webfreeze-bundle"
VERSION = 1
MANIFEST = "datapackage.json"
DIGEST_FILE = "datapackage-digest.json"
ZIP_TIME = (1980, 1, 1, 0, 0, 0)  # the same for every entry: packing twice gives the same bytes
STORED_SUFFIXES = (".wfz", ".png", ".jpg", ".jpeg", ".webp", ".gz", ".zst", ".zstd", ".wacz", ".zip", ".faiss")
MAX_MEMBER_BYTES = 64 * 2**30      # one member, uncompressed
MAX_TOTAL_BYTES = 256 * 2**30      # all members, uncompressed
MAX_MANIFEST_BYTES = 64 * 2**20    # datapackage.json and its digest file
MAX_RATIO = 200                    # uncompressed / compressed, for members above RATIO_FLOOR
RATIO_FLOOR = 1 << 20
RUN_FILES = ("manifest.json", "tasks.jsonl", "report.json", "report.html")
RUN_DIRS = ("trajectories", "screenshots", "references", "dom")
CASSETTE_NAME = "llm-cassette.sqlite"
CONTEXT_POOLS = "context/pools/"  # long-context runs' filler pools, by digest
CONTEXT_A1 = "context/a1/"        # runs that long-context runs took subtask A1's trajectories from


class BundleError(WebfreezeError, RuntimeError):
    """A bundle that cannot be made, read or trusted: one line for the user."""


class DamagedBundle(BundleError):
    """A member whose bytes are not the ones the manifest lists (``member`` names it)."""

    def __init__(self, message: str, member: str):
        super().__init__(message)
        self.member = member


# ==================================================================================== packing
@dataclass
class _Entry:
    path: str       # inside the bundle
    source: Path    # on disk


@dataclass
class PackPlan:
    entries: list = field(default_factory=list)
    contents: dict = field(default_factory=dict)
    shown: dict = field(default_factory=dict)  # a file made on the way -> the user's file it copies

    def add(self, path: str, source: Path) -> None:
        self.entries.append(_Entry(path, Path(source)))


def read_run_manifest(run: Path) -> dict:
    """A run folder's manifest, checked to be one (:class:`BundleError` otherwise)."""
    try:
        data = json.loads((run / "manifest.json").read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise BundleError(f"{run}: not a run folder (no manifest.json)") from None
    except (OSError, ValueError) as exc:
        raise BundleError(f"{run / 'manifest.json'}: not a readable run manifest ({exc})") from None
    if not isinstance(data, dict) or data.get("format") != "webfreeze-run":
        raise BundleError(f"{run / 'manifest.json'}: not a webfreeze run manifest")
    return data


def manifest_where(manifest: dict, key: str) -> str | None:
    """Where a run's suite or archive lay: a circumstance now, ``<key>.path`` in older manifests."""
    c = manifest.get("circumstances") if isinstance(manifest.get("circumstances"), dict) else {}
    part = manifest.get(key) if isinstance(manifest.get(key), dict) else {}
    return c.get(f"{key}_path") or part.get("path")


def report_judge(run: Path) -> str | None:
    """The judge a run folder's ``report.json`` names (None without a readable report)."""
    try:
        report = json.loads((run / "report.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    judge = report.get("judge") if isinstance(report, dict) else None
    return judge if isinstance(judge, str) else None


def run_files(root: Path) -> list[Path]:
    """The files under ``root`` a bundle takes: regular files, no links, no hidden or temporary ones."""
    return sorted(p for p in root.rglob("*") if p.is_file() and not p.is_symlink()
                  and not p.name.startswith(".") and ".tmp-" not in p.name)


def _check_suite_digest(suite_dir: Path, want: str | None) -> None:
    """A suite given with ``--suite`` must be the one the runs ran (its digest)."""
    try:
        got = load_suite(str(suite_dir)).digest
    except TaskError as exc:
        raise BundleError(str(exc)) from None
    if want and got != want:
        raise BundleError(f"{suite_dir}: is not the suite the runs ran (digest {got}, they ran {want})")


def _with_packed_digest(suite_dir: Path, packed: Path, staging: Path) -> Path:
    """A suite packed alone travels with a packed copy of its archive (other bytes, the same
    exchanges): its manifest, staged, names that copy's digest, so the bundle's suite and archive
    agree. A manifest that names no digest is taken as it is."""
    manifest = suite_dir / "manifest.json"
    data = json.loads(manifest.read_text(encoding="utf-8"))  # (load_suite has read it)
    if not isinstance(data, dict) or "archive_digest" not in data:
        return manifest
    data["archive_digest"] = archive_digest(packed)
    staged = staging / "suite-manifest.json"
    staged.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return staged


def plan_pack(sources: list, archive: str | None, staging: Path, *, suite: str | None = None,
              with_agent_source: bool = False, progress=None) -> PackPlan:
    """What a bundle of ``sources`` (run folders, or one suite folder) holds; the files it needs
    made (the cassette subsets, a packed archive) are written under ``staging``."""
    plan = PackPlan()
    runs, suite_dir = [], None
    for src in sources:
        p = Path(src)
        if not p.is_dir():
            raise BundleError(f"{p}: no such folder (give run folders, or a suite folder with --archive)")
        if (p / "manifest.json").is_file() and (p / "trajectories").is_dir():
            runs.append(p)
        elif (p / "tasks.jsonl").is_file():
            if suite_dir is not None or len(sources) > 1:
                raise BundleError("give one suite folder, or run folders of one suite")
            suite_dir = p
        else:
            raise BundleError(f"{p}: neither a run folder (manifest.json, trajectories/) nor a suite (tasks.jsonl)")
    manifests = {r: read_run_manifest(r) for r in runs}
    if runs:
        digests = {(m.get("suite") or {}).get("digest") for m in manifests.values()}
        archives = {(m.get("archive") or {}).get("digest") for m in manifests.values()}
        if len(digests) > 1 or len(archives) > 1:
            raise BundleError("the runs are not of one suite on one archive: bundle them separately")
        first = manifests[runs[0]]
        if suite is not None:
            suite_dir = Path(suite)
            if not (suite_dir / "tasks.jsonl").is_file():
                raise BundleError(f"{suite_dir}: not a suite folder (no tasks.jsonl)")
            _check_suite_digest(suite_dir, (first.get("suite") or {}).get("digest"))
        else:
            where = manifest_where(first, "suite")
            found = manifest_path(runs[0], where)
            if found is None or not (found / "tasks.jsonl").is_file():
                raise BundleError(f"{runs[0]}: the suite it ran ({where}) is not there any more; give --suite")
            suite_dir = found
        if archive:
            archive_path = Path(archive)
            if not archive_path.is_file():
                raise BundleError(f"{archive_path}: no such archive")
        else:
            where = manifest_where(first, "archive")
            found = manifest_path(runs[0], where)
            if found is None or not found.is_file():
                raise BundleError(f"{runs[0]}: the archive it ran ({where}) is not there any more; give --archive")
            archive_path = found
        want = (first.get("archive") or {}).get("digest")
        if file_digest(archive_path) != want:
            raise BundleError(f"{archive_path}: is not the archive the runs used (digest differs from {want})")
        require_intact(archive_path, action="no bundle was written")
    else:
        try:
            archive_path = resolve_archive(load_suite(str(suite_dir)), archive)
        except (TaskError, RunError) as exc:
            raise BundleError(str(exc)) from None
        # a suite alone: the archive is packed for sharing (with runs it stays as they cite it)
        packed = staging / archive_path.name
        pack_archive(archive_path, packed, progress=progress)
        plan.shown[packed] = archive_path
        archive_path = packed
    name = archive_path.name if archive_path.suffix == ".wfz" else f"{archive_path.stem}.wfz"
    plan.add(f"archive/{name}", archive_path)
    plan.contents["archive"] = f"archive/{name}"
    suite_files = {"suite/" + f.relative_to(suite_dir).as_posix(): f for f in run_files(suite_dir)}
    if not runs and "suite/manifest.json" in suite_files:
        suite_files["suite/manifest.json"] = _with_packed_digest(suite_dir, archive_path, staging)
    for member, f in suite_files.items():
        plan.add(member, f)
    plan.contents["suite"] = "suite/"
    plan.contents["runs"] = []
    personas = set()
    names: set[str] = set()
    pools: dict = {}    # pool digest -> its member
    a1_runs: dict = {}  # A1 run folder -> {"name", "files"}
    for run in runs:
        m = manifests[run]
        base = run.name or "run"
        name, i = base, 2
        while name in names:
            name, i = f"{base}-{i}", i + 1
        names.add(name)
        for fname in RUN_FILES:
            if (run / fname).is_file():
                plan.add(f"runs/{name}/{fname}", run / fname)
        if llm_judge_setting(report_judge(run)) is not None:  # (bundle run scores it again by the same judge)
            if not (run / JUDGE_CASSETTE).is_file():
                raise BundleError(f"{run}: its report was scored by the LLM judge, and the judge's cassette "
                                  f"({JUDGE_CASSETTE}) is not in the run folder: score it there again "
                                  f"(eval report --judge llm), or with the rules judge")
            plan.add(f"runs/{name}/{JUDGE_CASSETTE}", run / JUDGE_CASSETTE)
        for d in RUN_DIRS:
            if (run / d).is_dir():
                for f in run_files(run / d):
                    plan.add(f"runs/{name}/" + f.relative_to(run).as_posix(), f)
        entry = {"name": name, "path": f"runs/{name}/", "agent": (m.get("agent") or {}).get("name"),
                 "tasks": (m.get("selection") or {}).get("selected")}
        if isinstance(m.get("agent_code"), dict):
            entry["agent_code"] = m["agent_code"]
            if with_agent_source:
                entry["agent_source"] = _plan_agent_source(plan, run, name, entry["agent"], m["agent_code"])
        circumstances = m.get("circumstances") if isinstance(m.get("circumstances"), dict) else {}
        where = circumstances.get("cassette")
        if m.get("llm") and where:
            cassette = manifest_path(run, where) or (Path(where) if Path(where).is_absolute() else run / where)
            if not cassette.is_file():
                raise BundleError(f"{run}: its LLM cassette {cassette} is not there any more")
            used = used_entries(run) or None  # None: no trajectory names any (an older run)
            dest = staging / f"{name}-{CASSETTE_NAME}"
            try:
                if used is None:  # an older run that does not name its entries: the whole cassette
                    shutil.copyfile(cassette, dest)
                else:
                    write_subset(cassette, dest, used)
            except LLMError as exc:
                raise BundleError(str(exc)) from None
            plan.add(f"runs/{name}/{CASSETTE_NAME}", dest)
            entry["cassette"] = f"runs/{name}/{CASSETTE_NAME}"
        # A personalised run (manifest key "personas"; its folder in circumstances.persona_dir)
        # takes the persona folder along as personas/<folder name>/.
        persona = m.get("personas") if isinstance(m.get("personas"), dict) else None
        where = (m.get("circumstances") or {}).get("persona_dir") or (persona or {}).get("dir")
        if persona and where:
            pdir = Path(where)
            if not pdir.is_dir():
                raise BundleError(f"{run}: its persona folder {pdir} is not there any more")
            entry["personas"] = f"personas/{pdir.name}/"
            if pdir.name not in personas:
                personas.add(pdir.name)
                for f in run_files(pdir):
                    plan.add(f"personas/{pdir.name}/" + f.relative_to(pdir).as_posix(), f)
        context = _plan_context(plan, run, name, m, pools, a1_runs)
        if context is not None:
            entry["context"] = context
        plan.contents["runs"].append(entry)
    if personas:
        plan.contents["personas"] = [f"personas/{p}/" for p in sorted(personas)]
    if pools or a1_runs:
        plan.contents["context"] = {"pools": sorted(pools.values()),
                                    "a1_runs": sorted(f"{CONTEXT_A1}{a['name']}/" for a in a1_runs.values())}
    return plan


def _plan_agent_source(plan: PackPlan, run: Path, name: str, spec: str, code: dict) -> str:
    """A plug-in agent's source file as ``runs/<name>/agent/<file>``: the file this machine imports
    for ``spec``, which must be the one the run used (the SHA-256 its manifest holds)."""
    source = agent_source_path(spec)
    if source is None:
        raise BundleError(f"{run}: --with-agent-source: the source of agent {spec!r} cannot be found here")
    got = file_digest(source)
    if code.get("source_sha256") and got != code["source_sha256"]:
        raise BundleError(f"{source}: is not the agent source {name} ran (its SHA-256 differs from "
                          f"{code['source_sha256']})")
    member = f"runs/{name}/agent/{source.name}"
    plan.add(member, source)
    return member


def _plan_context(plan: PackPlan, run: Path, name: str, manifest: dict, pools: dict, a1_runs: dict) -> dict | None:
    """The members a long-context run (manifest key ``context``) needs to be run again: its filler
    pool as ``context/pools/<digest>.jsonl`` and, when it took A1's trajectories from another run,
    that run's manifest, tasks.jsonl (an A2-only run may read A1's instruction there) and exactly the
    A1 trajectories it used, under ``context/a1/<run>/``. Each is checked against the digest the
    run's manifest holds: a pool or A1 run changed since is refused. Returns the run's ``context``
    entry for the bundle manifest, or None for a run without a condition."""
    ctx = manifest.get("context")
    if not isinstance(ctx, dict) or not ctx:
        return None
    where = manifest.get("circumstances") if isinstance(manifest.get("circumstances"), dict) else {}
    out = {"pool": None, "a1_run": None}
    pool = ctx.get("pool")
    if isinstance(pool, dict):
        path = where.get("context_pool")
        if not path or not Path(path).is_file():
            raise BundleError(f"{run}: the filler pool it ran with ({path}) is not there any more")
        want = pool.get("digest")
        if file_digest(path) != want:
            raise BundleError(f"{path}: is not the filler pool {run.name} ran with (its digest differs from {want})")
        if want not in pools:
            pools[want] = f"{CONTEXT_POOLS}{str(want).partition(':')[2] or want}.jsonl"
            plan.add(pools[want], Path(path))
        out["pool"] = pools[want]
    a1 = ctx.get("a1_run")
    if isinstance(a1, dict):
        path = where.get("context_a1_run")
        if not path or not (Path(path) / "trajectories").is_dir():
            raise BundleError(f"{run}: the run it took subtask A1 from ({path}) is not there any more")
        tasks = a1.get("tasks") if isinstance(a1.get("tasks"), list) else []
        found = []
        try:
            for task_id in tasks:
                traj = a1_trajectory(path, str(task_id))
                if traj is None:
                    raise BundleError(f"{path}: holds no trajectory of subtask A1 {task_id!r}, which {run.name} used")
                found.append(traj)
        except ContextError as exc:
            raise BundleError(str(exc)) from None
        if trajectories_digest(found) != a1.get("digest"):
            raise BundleError(f"{path}: its A1 trajectories are not the ones {run.name} used (their digest differs "
                              f"from {a1.get('digest')})")
        key = Path(path).resolve()
        if key not in a1_runs:
            taken = {a["name"] for a in a1_runs.values()}
            base = key.name or "a1"
            a1_name, i = base, 2
            while a1_name in taken:
                a1_name, i = f"{base}-{i}", i + 1
            a1_runs[key] = {"name": a1_name, "files": set()}
        entry = a1_runs[key]
        prefix = f"{CONTEXT_A1}{entry['name']}/"
        wanted = [f for f in ("manifest.json", "tasks.jsonl") if (key / f).is_file()]
        wanted += [f"trajectories/{t}.json" for t in tasks]
        for rel in wanted:
            if rel not in entry["files"]:  # (two runs may take A1 from the same run)
                entry["files"].add(rel)
                plan.add(prefix + rel, key / rel)
        out["a1_run"] = prefix
    return out


def _refuse_secrets(plan: PackPlan) -> None:
    """Refuse (one line) a bundle whose archive or trajectories hold a credential we recognise."""
    by_path = {e.path: e.source for e in plan.entries}
    archive = by_path.get(plan.contents.get("archive"))
    trajectories = [e.source for e in plan.entries if e.path.endswith(".json") and (
        "/trajectories/" in e.path or "/references/" in e.path or e.path.startswith("suite/references/"))]
    try:
        check_shareable(archives=[archive] if archive else [], trajectories=trajectories, what="the bundle",
                        shown=plan.shown)
    except SecretsFound as exc:
        raise BundleError(str(exc)) from None


def _compression(path: str) -> int:
    return zipfile.ZIP_STORED if path.lower().endswith(STORED_SUFFIXES) else zipfile.ZIP_DEFLATED


def _zip_info(path: str) -> zipfile.ZipInfo:
    info = zipfile.ZipInfo(path, ZIP_TIME)
    info.compress_type = _compression(path)
    info.external_attr = (stat.S_IFREG | 0o644) << 16
    info.create_system = 3  # unix: the mode above is read as such
    return info


def _json_bytes(data) -> bytes:
    return (json.dumps(data, indent=1, sort_keys=True, ensure_ascii=False) + "\n").encode("utf-8")


def redacted_sources(sources: list, suite, archive, staging: Path, *, params=(), headers=(), secret_env=(),
                     allow_visible_secrets: bool = False):
    """For ``bundle pack --redact``: redacted copies, under ``staging``, of the archive, the suite
    and each run folder (trajectories, references, tasks, manifest, reports, DOM snapshots and the
    LLM cassette, whose keys and the trajectories' ``llm_entries`` follow its redacted requests),
    all with one mapping; the runs' manifests name the redacted archive and suite by their new
    digests. Returns (run folders or the suite folder, suite, archive) to pack."""
    runs = [Path(s) for s in sources if (Path(s) / "manifest.json").is_file() and (Path(s) / "trajectories").is_dir()]
    if runs:
        first = read_run_manifest(runs[0])
        suite_dir = Path(suite) if suite else manifest_path(runs[0], manifest_where(first, "suite"))
        archive_path = Path(archive) if archive else manifest_path(runs[0], manifest_where(first, "archive"))
        if suite_dir is None or archive_path is None:
            raise BundleError(f"{runs[0]}: its suite or archive is not there any more; give --suite and --archive")
    else:
        suite_dir = Path(sources[0])
        try:
            archive_path = resolve_archive(load_suite(str(suite_dir)), archive)
        except (TaskError, RunError) as exc:
            raise BundleError(str(exc)) from None
    trajectories = [p for run in runs for p in sorted((run / "trajectories").glob("*.json"))]
    staging.mkdir(parents=True, exist_ok=True)
    require_intact(archive_path, action="no bundle was written")
    r = make_redactor(archive_path, suite=suite_dir, params=params, headers=headers, trajectories=trajectories,
                      secret_env=secret_env)
    red_archive = staging / (archive_path.stem + ".wfz")
    redact_archive(archive_path, red_archive, r)
    new_digest = archive_digest(red_archive)
    red_suite = staging / "suite"
    redact_suite(suite_dir, red_suite, r, archive_out=red_archive, archive_digest=new_digest)
    if not runs:
        return [str(red_suite)], str(red_suite), str(red_archive)
    try:
        redacted_suite = load_suite(str(red_suite))
    except TaskError as exc:
        raise BundleError(str(exc)) from None
    new_suite_digest = redacted_suite.digest
    out_runs = []
    for i, run in enumerate(runs):
        m = read_run_manifest(run)
        replace = {d: n for d, n in (((m.get("archive") or {}).get("digest"), new_digest),
                                     ((m.get("suite") or {}).get("digest"), new_suite_digest)) if d}
        selection = m.get("selection") or {}
        if selection.get("digest") and isinstance(selection.get("ids"), list):
            # a run of some of the tasks (--tasks, --limit): its selection's digest, of the redacted lines
            by_id = {t.id: t.raw for t in redacted_suite.tasks}
            if all(tid in by_id for tid in selection["ids"]):
                replace.setdefault(selection["digest"], suite_digest([by_id[tid] for tid in selection["ids"]]))
        dest = staging / "runs" / str(i) / run.name
        keys: dict = {}
        where = (m.get("circumstances") or {}).get("cassette")
        if m.get("llm") and where:
            cassette = manifest_path(run, where)
            if cassette is None:
                raise BundleError(f"{run}: its LLM cassette {where} is not there any more")
            dest.mkdir(parents=True)
            keys = redact_file(cassette, dest / "llm-cassette.sqlite", r.cassette_text)["keys"]
        files = [run / f for f in RUN_FILES if (run / f).is_file()]
        files += [f for d in RUN_DIRS if d != "dom" and (run / d).is_dir() for f in run_files(run / d)]
        replace = dict(replace)
        old_llm = (m.get("llm") or {}).get("entries_digest")
        if keys and old_llm:  # the run's digest of the entries it used: of the redacted ones now
            from webfreeze.llm import Cassette

            renamed = sorted([keys.get(k, k), n] for k, n in used_entries(run))
            with Cassette(dest / "llm-cassette.sqlite", "replay") as redacted:
                replace[old_llm] = redacted.entries_digest(renamed)[0]
        if (run / "dom").is_dir():  # content-addressed snapshots: a redacted one gets a new name
            replace.update(redact_doms(r, run / "dom", dest / "dom"))
        for f in files:
            rel = f.relative_to(run)
            redact_text_file(r, f, dest / rel, replace, keys,
                              trajectory=rel.parts[0] in ("trajectories", "references"))
        manifest = json.loads((dest / "manifest.json").read_text(encoding="utf-8"))
        c = manifest.setdefault("circumstances", {})
        c.update(suite_path=str(red_suite.resolve()), archive_path=str(red_archive.resolve()))
        if keys:
            c["cassette"] = "llm-cassette.sqlite"
        c["redacted"] = True
        (dest / "manifest.json").write_text(json.dumps(manifest, indent=1, ensure_ascii=False) + "\n",
                                            encoding="utf-8")
        settle_redacted_run(run, dest, red_suite, red_archive, staging / "rerun" / str(i),
                            allow_visible_secrets=allow_visible_secrets, where_placed=r.where_placed)
        out_runs.append(str(dest))
    return out_runs, str(red_suite), str(red_archive)


def _prune_doms(run: Path) -> None:
    """Remove a redacted run's DOM snapshots that no step names any more."""
    named = set()
    for path in (run / "trajectories").glob("*.json"):
        try:
            steps = json.loads(path.read_text(encoding="utf-8")).get("steps") or []
        except (ValueError, AttributeError):
            continue
        named |= {s.get("dom") for s in steps if isinstance(s, dict)}
    for f in sorted((run / "dom").glob("*")) if (run / "dom").is_dir() else []:
        if f.is_file() and f"dom/{f.name}" not in named:
            f.unlink()


def _placed_in(rerun: Path, step: dict, archive: Path, where_placed) -> list[str]:
    """What the secrets are whose placeholders a re-run's step showed (``where_placed``'s account
    of each, in the order they first appear): read in the step's DOM snapshot, else in the redacted
    archive's captures of the step's page; [] when neither can be read."""
    from webfreeze.archives import Archive
    from webfreeze.simulator.trajectory import read_dom

    html = ""
    try:
        if isinstance(step.get("dom"), str) and not _bad_name(step["dom"]):
            html = read_dom(rerun / step["dom"]).decode("utf-8", "replace")
        elif isinstance(step.get("url"), str):
            with Archive.open(archive) as arc:
                html = "\n".join(ex.body().decode("utf-8", "replace")
                                 for ex in arc.exchanges(url=step["url"].split("#", 1)[0], limit=5))
    except Exception:  # (a snapshot or capture that does not read: nothing to name)
        return []
    out = []
    for placeholder in dict.fromkeys(PLACEHOLDER_RE.findall(html)):
        said = where_placed(placeholder)
        if said and said not in out:
            out.append(said)
    return out


def _steps_list(steps) -> str:
    return ", ".join(str(n) for n in steps[:8]) + (f" and {len(steps) - 8} more" if len(steps) > 8 else "")


def settle_redacted_run(run: Path, dest: Path, suite: Path, archive: Path, rerun: Path, *,
                        allow_visible_secrets: bool = False, where_placed=None) -> None:
    """Make a redacted run's record describe the redacted archive it is bundled with, and prove it.

    Its episodes are run again, offline, on the redacted suite and archive (LLM calls from the
    redacted cassette in strict replay). What the replay answered (the ``replay`` provenance of the
    trajectory and of each step: sizes of the answers, levels) is taken from that run, since a
    placeholder changes the length of every body that held a secret; the report is written again
    from the trajectories. A step whose observation changed (its ``obs_digest`` differs) showed the
    agent a secret: refused, naming the steps, unless ``allow_visible_secrets`` (their digests are
    then the re-run's: the observations of the redacted archive). A step that shows what the agent
    itself typed (a password's placeholder) is not refused: its digest is the re-run's too. Finally
    the run must equal its re-run as ``bundle run`` compares them, or nothing is packed.
    ``where_placed(placeholder)``: what and where a placeholder's secret was found (the redactor's),
    for the refusal to name the secrets the re-run's pages show (never their values)."""
    from webfreeze.bundles.run import compare_run, rerun_settings, run_quietly
    from webfreeze.eval.report import scored_strictly, write_report

    if llm_judge_setting(report_judge(run)) is not None:
        raise BundleError(f"refused: run {run.name}: its report was scored by the LLM judge, which cannot score "
                          f"the redacted run again (its cassette holds what it was shown, secrets included); "
                          f"score the run with the rules judge (eval report {run}) to pack it redacted")
    manifest = read_run_manifest(dest)
    cassette = dest / CASSETTE_NAME
    config = rerun_settings(manifest, suite, archive, rerun, cassette if cassette.is_file() else None)
    c = read_run_manifest(run).get("circumstances") or {}
    persona = manifest.get("personas") if isinstance(manifest.get("personas"), dict) else None
    if persona and c.get("persona_dir"):
        config["persona"] = str(c["persona_dir"])
        config["history"] = dict(persona.get("retrieval") or {})
    ctx = manifest.get("context")
    if isinstance(ctx, dict) and ctx:
        config["context"] = {"tokens": ctx.get("tokens"), "tokenizer": ctx.get("tokenizer"), "seed": ctx.get("seed", 0),
                             "pool": c.get("context_pool") if isinstance(ctx.get("pool"), dict) else None,
                             "a1_run": c.get("context_a1_run") if isinstance(ctx.get("a1_run"), dict) else None}
    try:
        run_quietly(config)
    except WebfreezeError as exc:
        raise BundleError(f"refused: run {run.name}: redacted, it cannot be run again on the redacted archive "
                          f"({str(exc).splitlines()[0]}); nothing was packed") from None
    visible: list[str] = []
    named: list[str] = []  # (what the secrets shown are, from the re-run's pages: never their values)
    for path in sorted((dest / "trajectories").glob("*.json")):
        again = rerun / "trajectories" / path.name
        if not again.is_file():
            continue  # (the comparison below names it)
        mine, theirs = (json.loads(p.read_text(encoding="utf-8")) for p in (path, again))
        if not isinstance(mine, dict) or not isinstance(theirs, dict):
            continue
        if "replay" in theirs:
            mine["replay"] = theirs["replay"]
        shown = []
        typing_on = None  # the page where the agent typed a redacted value, until it leaves it
        for a, b in zip(mine.get("steps") or [], theirs.get("steps") or []):
            if not isinstance(a, dict) or not isinstance(b, dict):
                continue
            if typing_on is not None and a.get("url") != typing_on:
                typing_on = None
            if "replay" in b:
                a["replay"] = b["replay"]
            if isinstance(b.get("dom"), str) and (rerun / b["dom"]).is_file() and not _bad_name(b["dom"]):
                # the page as the redacted archive serves it (the redacted copy of the original
                # keeps what literal replacement could not reach)
                a["dom"] = b["dom"]
                (dest / b["dom"]).parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(rerun / b["dom"], dest / b["dom"])
            if a.get("obs_digest") != b.get("obs_digest"):
                if typing_on is not None:
                    # the field shows what the agent typed (a password's placeholder, or its bullets):
                    # its own input, not a secret the site showed it; the digest is the re-run's (the
                    # original's would let anyone test guesses of the password against it)
                    a["obs_digest"] = b.get("obs_digest")
                else:
                    shown.append(a.get("step"))
                    if allow_visible_secrets:  # what the agent sees on the redacted archive
                        a["obs_digest"] = b.get("obs_digest")
                    if where_placed is not None and len(named) < 3:
                        named.extend(w for w in _placed_in(rerun, b, archive, where_placed) if w not in named)
            typed = typed_value(a)
            if isinstance(typed, str) and typed.startswith(PLACEHOLDER_PREFIX):
                typing_on = a.get("url")
        if shown:
            visible.append(f"{path.stem} step{'s' if len(shown) > 1 else ''} {_steps_list(shown)}")
        path.write_text(json.dumps(mine, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    _prune_doms(dest)
    if visible and not allow_visible_secrets:
        what = f" ({'; '.join(named[:3])})" if named else ""
        raise BundleError(f"refused: run {run.name}: a secret was visible to the agent (the observation changes "
                          f"under redaction) in {'; '.join(visible)}{what}; give --allow-visible-secrets to pack it "
                          f"anyway (those steps then record what the redacted archive shows)")
    if (run / "report.json").is_file():
        strict = scored_strictly(run)  # (scored as the run's own report was)
        write_report(dest, strict_replay=strict)
        write_report(rerun, strict_replay=strict)
    difference = compare_run(dest, rerun)
    if difference is not None:
        raise BundleError(f"refused: run {run.name}: redacted, it does not re-run identically on the redacted "
                          f"archive ({difference}); nothing was packed")


def pack(sources: list, out, *, archive: str | None = None, key: str | None = None, title: str | None = None,
         suite: str | None = None, with_agent_source: bool = False, redact: bool = False,
         allow_secrets: bool = False, params=(), headers=(), secret_env=(), allow_visible_secrets: bool = False,
         progress=None) -> dict:
    """Write the bundle of ``sources`` (run folders of one suite, or a suite folder) to ``out``,
    atomically (beside it, renamed when complete). ``key``: an Ed25519 private key (PEM) to sign
    it with. Returns the bundle's manifest."""
    out = Path(out)
    if out.is_dir():
        raise BundleError(f"{out}: is a folder; give a file name such as NAME.wfb")
    if not out.parent.is_dir():
        raise BundleError(f"{out.parent}: no such folder")
    signer = _load_private_key(key) if key else None
    staging = Path(tempfile.mkdtemp(prefix="webfreeze-bundle-"))
    tmp = out.with_name(f".{out.name}.partial-{os.getpid()}")
    try:
        sources = [str(s) for s in sources]
        if redact:  # one mapping for the archive, the suite, the runs and their cassettes
            sources, suite, archive = redacted_sources(sources, suite, archive, staging / "redacted",
                                                       params=params, headers=headers, secret_env=secret_env,
                                                       allow_visible_secrets=allow_visible_secrets)
        plan = plan_pack(sources, archive, staging, suite=suite, with_agent_source=with_agent_source,
                         progress=progress)
        if not allow_secrets:
            _refuse_secrets(plan)
        seen = set()
        resources = []
        for e in plan.entries:
            if e.path in seen:
                raise BundleError(f"{e.path}: two files would have this place in the bundle")
            seen.add(e.path)
            resources.append({"name": PurePosixPath(e.path).name, "path": e.path, "bytes": e.source.stat().st_size,
                              "hash": file_digest(e.source)})
        manifest = {"profile": "data-package", "format": FORMAT, "version": VERSION,
                    "title": title or out.stem, "software": f"webfreeze {__version__}",
                    "contents": plan.contents, "resources": resources}
        manifest_bytes = _json_bytes(manifest)
        digest = {"path": MANIFEST, "hash": "sha256:" + hashlib.sha256(manifest_bytes).hexdigest()}
        if signer is not None:
            digest.update(_sign(signer, digest["hash"]))
        with zipfile.ZipFile(tmp, "w", allowZip64=True) as zf:
            zf.writestr(_zip_info(MANIFEST), manifest_bytes)
            zf.writestr(_zip_info(DIGEST_FILE), _json_bytes(digest))
            for e, res in zip(plan.entries, resources):
                with open(e.source, "rb") as src, zf.open(_zip_info(e.path), "w", force_zip64=True) as dst:
                    shutil.copyfileobj(src, dst, 1 << 20)
        os.replace(tmp, out)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return manifest


# ==================================================================================== signing
def _crypto():
    # (late: the sign extra; bundles are packed and read without it)
    try:
        from cryptography.hazmat.primitives import serialization
        from cryptography.hazmat.primitives.asymmetric import ed25519
    except ImportError:
        raise BundleError("signing needs the cryptography package: pip install 'webfreeze[sign]'") from None
    return serialization, ed25519


def _load_private_key(path: str):
    serialization, ed25519 = _crypto()
    try:
        key = serialization.load_pem_private_key(Path(path).read_bytes(), password=None)
    except (OSError, ValueError, TypeError) as exc:
        raise BundleError(f"{path}: not a readable PEM private key ({str(exc).splitlines()[0]})") from None
    if not isinstance(key, ed25519.Ed25519PrivateKey):
        raise BundleError(f"{path}: not an Ed25519 private key")
    return key


def _load_public_key(path: str):
    serialization, ed25519 = _crypto()
    data = Path(path).read_bytes()
    try:
        key = serialization.load_pem_public_key(data)
    except ValueError:
        try:  # a private key file also names its public key
            key = serialization.load_pem_private_key(data, password=None).public_key()
        except (ValueError, TypeError) as exc:
            raise BundleError(f"{path}: not a readable PEM Ed25519 key ({str(exc).splitlines()[0]})") from None
    if not isinstance(key, ed25519.Ed25519PublicKey):
        raise BundleError(f"{path}: not an Ed25519 key")
    return key


def _raw_public(key) -> bytes:
    serialization, _ = _crypto()
    return key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)


def _sign(private_key, manifest_hash: str) -> dict:
    """The signature fields of the digest file: Ed25519 over the manifest's ``sha256:<hex>`` text."""
    return {"signature": {"alg": "ed25519", "public_key": base64.b64encode(_raw_public(private_key.public_key()))
                          .decode(), "value": base64.b64encode(private_key.sign(manifest_hash.encode())).decode()}}


def key_fingerprint(raw_public: bytes) -> str:
    return "sha256:" + hashlib.sha256(raw_public).hexdigest()[:16]


# ==================================================================================== reading
@dataclass
class Bundle:
    """A bundle whose structure and manifest passed the checks (see :func:`open_bundle`)."""
    path: Path
    zf: zipfile.ZipFile
    manifest: dict
    digest: dict
    infos: dict  # member path -> ZipInfo

    def close(self) -> None:
        self.zf.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    @property
    def resources(self) -> dict:
        return {r["path"]: r for r in self.manifest["resources"]}


def _bad_name(name: str) -> str | None:
    if not name or "\\" in name or "\x00" in name:
        return "has a backslash or NUL in its name"
    if name.startswith("/") or (len(name) > 1 and name[1] == ":"):
        return "is an absolute path"
    parts = name.split("/")
    if any(p == ".." for p in parts):
        return "leads out of the folder it is extracted to (..)"
    if any(p in ("", ".") for p in parts[:-1]):
        return "has an empty or '.' path part"
    return None


def _read_small(zf: zipfile.ZipFile, info: zipfile.ZipInfo, what: str) -> bytes:
    if info.file_size > MAX_MANIFEST_BYTES:
        raise BundleError(f"{what} is {info.file_size} bytes, more than a manifest may be ({MAX_MANIFEST_BYTES})")
    try:
        with zf.open(info) as f:
            data = f.read(MAX_MANIFEST_BYTES + 1)
    except (zipfile.BadZipFile, zlib.error, OSError, EOFError, ValueError) as exc:
        raise DamagedBundle(f"damaged member {info.filename}: {str(exc).splitlines()[0]}", info.filename) from None
    if len(data) > MAX_MANIFEST_BYTES:
        raise BundleError(f"{what} is larger than a manifest may be")
    return data


def open_bundle(path) -> Bundle:
    """Open a bundle and check its structure, before anything is read out of it: member names, the
    zip and the manifest listing the same members with the same sizes, sizes within limits, no
    compression bomb, and the manifest's own digest. Raises :class:`BundleError` (one line)."""
    path = Path(path)
    if not path.is_file():
        raise BundleError(f"{path}: no such bundle")
    try:
        zf = zipfile.ZipFile(path)
    except (zipfile.BadZipFile, OSError) as exc:
        raise BundleError(f"{path}: not a bundle (not a readable zip: {str(exc).splitlines()[0]})") from None
    try:
        return _checked(path, zf)
    except BaseException:
        zf.close()
        raise


def _checked(path: Path, zf: zipfile.ZipFile) -> Bundle:
    infos: dict[str, zipfile.ZipInfo] = {}
    total = 0
    for info in zf.infolist():
        name = info.filename
        why = _bad_name(name)
        if why:
            raise BundleError(f"{path}: refused: member {name!r} {why}")
        if name in infos:
            raise BundleError(f"{path}: refused: member {name!r} appears twice")
        mode = info.external_attr >> 16
        if info.is_dir():
            continue
        if mode and stat.S_ISLNK(mode):
            raise BundleError(f"{path}: refused: member {name!r} is a symbolic link")
        if info.file_size > MAX_MEMBER_BYTES:
            raise BundleError(f"{path}: refused: member {name!r} is oversized ({info.file_size} bytes; "
                              f"the limit is {MAX_MEMBER_BYTES})")
        if info.file_size > RATIO_FLOOR and info.file_size > MAX_RATIO * max(info.compress_size, 1):
            raise BundleError(f"{path}: refused: member {name!r} is a compression bomb ({info.file_size} bytes "
                              f"from {info.compress_size}, more than {MAX_RATIO}:1)")
        total += info.file_size
        infos[name] = info
    if total > MAX_TOTAL_BYTES:
        raise BundleError(f"{path}: refused: its members hold {total} bytes, more than {MAX_TOTAL_BYTES}")
    if MANIFEST not in infos or DIGEST_FILE not in infos:
        raise BundleError(f"{path}: not a bundle (no {MANIFEST} or {DIGEST_FILE})")
    raw = _read_small(zf, infos[MANIFEST], MANIFEST)
    try:
        digest = json.loads(_read_small(zf, infos[DIGEST_FILE], DIGEST_FILE))
    except ValueError:
        raise DamagedBundle(f"damaged member {DIGEST_FILE}: not JSON", DIGEST_FILE) from None
    if not isinstance(digest, dict) or digest.get("hash") != "sha256:" + hashlib.sha256(raw).hexdigest():
        raise DamagedBundle(f"damaged member {MANIFEST}: its digest is not the one {DIGEST_FILE} holds", MANIFEST)
    try:
        manifest = json.loads(raw)
    except ValueError:
        raise DamagedBundle(f"damaged member {MANIFEST}: not JSON", MANIFEST) from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise BundleError(f"{path}: not a webfreeze bundle ({MANIFEST} format is not {FORMAT!r})")
    if not isinstance(manifest.get("version"), int) or manifest["version"] > VERSION:
        raise BundleError(f"{path}: bundle version {manifest.get('version')!r} is newer than this webfreeze "
                          f"reads ({VERSION}); upgrade webfreeze")
    resources = manifest.get("resources")
    if not isinstance(resources, list) or not all(
            isinstance(r, dict) and isinstance(r.get("path"), str) and isinstance(r.get("bytes"), int)
            and isinstance(r.get("hash"), str) for r in resources):
        raise BundleError(f"{path}: {MANIFEST} lists its resources without path, bytes and hash")
    listed = {}
    for r in resources:
        why = _bad_name(r["path"])
        if why:
            raise BundleError(f"{path}: refused: manifest entry {r['path']!r} {why}")
        if r["path"] in listed:
            raise BundleError(f"{path}: refused: manifest entry {r['path']!r} appears twice")
        listed[r["path"]] = r
    members = set(infos) - {MANIFEST, DIGEST_FILE}
    extra = sorted(members - set(listed))
    if extra:
        raise BundleError(f"{path}: refused: member {extra[0]!r} is not in the manifest")
    missing = sorted(set(listed) - members)
    if missing:
        raise BundleError(f"{path}: refused: manifest entry {missing[0]!r} has no member in the zip")
    for name in sorted(members):
        if infos[name].file_size != listed[name]["bytes"]:
            bigger = infos[name].file_size > listed[name]["bytes"]
            raise BundleError(f"{path}: refused: member {name!r} is {'oversized' if bigger else 'short'}: "
                              f"{infos[name].file_size} bytes in the zip, {listed[name]['bytes']} in the manifest")
    return Bundle(path, zf, manifest, digest, infos)


def _stream(bundle: Bundle, name: str, sink=None) -> None:
    """Read member ``name``, checking its digest and size as it goes; ``sink(chunk)`` gets the bytes.
    A mismatch (or the zip's own CRC failing) is a :class:`DamagedBundle` naming the member."""
    res = bundle.resources[name]
    h, n = hashlib.sha256(), 0
    try:
        with bundle.zf.open(bundle.infos[name]) as f:
            while True:
                chunk = f.read(1 << 20)
                if not chunk:
                    break
                n += len(chunk)
                if n > res["bytes"]:  # the zip's header lied about the size
                    raise DamagedBundle(f"damaged member {name}: longer than the manifest says", name)
                h.update(chunk)
                if sink:
                    sink(chunk)
    except (zipfile.BadZipFile, zlib.error, OSError, EOFError, ValueError, NotImplementedError) as exc:
        raise DamagedBundle(f"damaged member {name}: {str(exc).splitlines()[0]}", name) from None
    if n != res["bytes"] or "sha256:" + h.hexdigest() != res["hash"]:
        raise DamagedBundle(f"damaged member {name}: its SHA-256 is not the one the manifest lists", name)


def check_digests(bundle: Bundle, progress=None) -> int:
    """Every member's size and SHA-256 against the manifest; returns the bytes checked."""
    total = 0
    for name in sorted(bundle.resources):
        _stream(bundle, name, (lambda c: progress(len(c))) if progress else None)
        total += bundle.resources[name]["bytes"]
    return total


def member_json(bundle: Bundle, name: str, what: str):
    """A small JSON member, read and parsed in memory (its digest checked as it is read)."""
    if name not in bundle.resources:
        raise BundleError(f"{bundle.path}: refused: {what} ({name}) is not in the bundle")
    if bundle.resources[name]["bytes"] > MAX_MANIFEST_BYTES:
        raise BundleError(f"{bundle.path}: refused: {what} ({name}) is larger than such a file may be")
    chunks: list[bytes] = []
    _stream(bundle, name, chunks.append)
    try:
        return json.loads(b"".join(chunks))
    except ValueError:
        raise BundleError(f"{bundle.path}: refused: {what} ({name}) is not readable JSON") from None


def check_context_members(bundle: Bundle) -> None:
    """Each bundled long-context run's filler pool and A1 trajectories must be the ones its manifest
    names (the pool's file digest; the A1 trajectories' digest, timings aside): a bundle whose members
    agree with its datapackage.json but not with the runs (re-packed after a change) is refused in
    one line. Reads members in memory only; nothing is written."""
    for run in (bundle.manifest.get("contents") or {}).get("runs") or []:
        if not isinstance(run, dict) or not isinstance(run.get("path"), str):
            continue
        name = run.get("name")
        if f"{run['path']}manifest.json" not in bundle.resources:
            continue  # (bundle run refuses a run without its manifest on its own)
        manifest = member_json(bundle, f"{run['path']}manifest.json", f"the manifest of run {name}")
        ctx = manifest.get("context") if isinstance(manifest, dict) else None
        if not isinstance(ctx, dict) or not ctx:
            continue
        members = run.get("context") if isinstance(run.get("context"), dict) else {}
        pool = ctx.get("pool")
        if isinstance(pool, dict):
            member = members.get("pool")
            if not isinstance(member, str) or member not in bundle.resources:
                raise BundleError(f"{bundle.path}: refused: run {name} ran under a long-context condition and its "
                                  f"filler pool is not in the bundle")
            if bundle.resources[member]["hash"] != pool.get("digest"):
                raise BundleError(f"{bundle.path}: refused: run {name}: {member} is not the filler pool it ran with "
                                  f"(its digest differs from {pool.get('digest')})")
        a1 = ctx.get("a1_run")
        if isinstance(a1, dict):
            prefix = members.get("a1_run")
            # (the re-run reads this folder: it must be a folder of the bundle's own)
            if not isinstance(prefix, str) or not prefix.startswith(CONTEXT_A1) or not prefix.endswith("/") \
                    or _bad_name(prefix[:-1]):
                raise BundleError(f"{bundle.path}: refused: run {name} took subtask A1 from another run, which is "
                                  f"not in the bundle")
            tasks = a1.get("tasks") if isinstance(a1.get("tasks"), list) else []
            found = [member_json(bundle, f"{prefix}trajectories/{t}.json", f"the trajectory of subtask A1 {t!r}")
                     for t in tasks]
            if trajectories_digest(found) != a1.get("digest"):
                raise BundleError(f"{bundle.path}: refused: run {name}: the A1 trajectories under {prefix} are not "
                                  f"the ones it used (their digest differs from {a1.get('digest')})")


def check_signature(bundle: Bundle, key: str | None) -> str | None:
    """With ``key`` (an Ed25519 public key, PEM), the signature must be there and be that key's.
    Returns a line describing the signature (None for an unsigned bundle checked without a key)."""
    sig = bundle.digest.get("signature")
    if key is None:
        if sig is None:
            return None
        if not isinstance(sig, dict) or sig.get("alg") != "ed25519":
            raise BundleError(f"{bundle.path}: its signature is broken (not an Ed25519 signature)")
        try:
            raw = base64.b64decode(sig.get("public_key", ""), validate=True)
            value = base64.b64decode(sig.get("value", ""), validate=True)
        except (ValueError, TypeError):
            raise BundleError(f"{bundle.path}: its signature is broken (it names no readable public key)") from None
        fp = key_fingerprint(raw)
        # The embedded key proves nothing about who signed, but a signature that fails even against
        # the key it names is damage (or tampering), never "signed".
        _, ed25519 = _crypto()
        from cryptography.exceptions import InvalidSignature  # (late: the sign extra, as _crypto)

        try:
            ed25519.Ed25519PublicKey.from_public_bytes(raw).verify(value, str(bundle.digest.get("hash")).encode())
        except (InvalidSignature, ValueError, TypeError):
            raise BundleError(f"{bundle.path}: its signature is broken: it does not verify against the key it "
                              f"names ({fp})") from None
        return f"signed by key {fp}: valid, but not checked against a key you trust (give --key)"
    public = _load_public_key(key)
    if not isinstance(sig, dict) or sig.get("alg") != "ed25519":
        raise BundleError(f"{bundle.path}: not signed (an Ed25519 signature was required by --key)")
    from cryptography.exceptions import InvalidSignature  # (late: the sign extra, as _crypto)

    try:
        public.verify(base64.b64decode(sig.get("value", ""), validate=True), bundle.digest["hash"].encode())
    except (InvalidSignature, ValueError, TypeError):
        raise BundleError(f"{bundle.path}: the signature is not valid for the key in {key}") from None
    return f"signature valid (key {key_fingerprint(_raw_public(public))})"


def extract(bundle: Bundle, dest: Path, prefix: str = "", *, strip: str = "") -> list[Path]:
    """Write the members under ``prefix`` to ``dest`` (their path less ``strip``), each checked as
    it is written. Only names that passed :func:`open_bundle`'s checks are ever joined to ``dest``."""
    written = []
    root = dest.resolve()
    for name in sorted(bundle.resources):
        if not name.startswith(prefix):
            continue
        rel = name[len(strip):] if strip and name.startswith(strip) else name
        target = (dest / rel).resolve()
        if root not in target.parents:  # belt and braces: the names were checked when opened
            raise BundleError(f"{bundle.path}: refused: member {name!r} would be written outside {dest}")
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_name(f".{target.name}.partial")
        try:
            with open(tmp, "wb") as out:
                _stream(bundle, name, out.write)
            os.replace(tmp, target)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
        written.append(target)
    return written


def verify(path, *, key: str | None = None, deep: bool = True, progress=None) -> dict:
    """Check a bundle: its structure (:func:`open_bundle`), every member's digest, the signature
    (with ``key``), and with ``deep`` the archive's own verification and each cassette's. Returns a
    summary; raises :class:`BundleError` / :class:`DamagedBundle` at the first problem."""
    with open_bundle(path) as bundle:
        checked = check_digests(bundle, progress)
        signature = check_signature(bundle, key)
        check_context_members(bundle)
        result = {"bundle": str(path), "members": len(bundle.resources), "bytes": checked, "signature": signature,
                  "archive": None, "cassettes": 0}
        if deep:
            result.update(_deep_checks(bundle))
    return result


def _deep_checks(bundle: Bundle) -> dict:
    contents = bundle.manifest.get("contents") or {}
    out = {"archive": None, "cassettes": 0}
    tmp = Path(tempfile.mkdtemp(prefix="webfreeze-bundle-verify-"))
    try:
        name = contents.get("archive")
        if name in bundle.resources:
            extract(bundle, tmp, name)
            try:
                report = verify_archive(tmp / name)
            except ArchiveError as exc:
                raise DamagedBundle(f"damaged member {name}: {exc}".replace(str(tmp / name), name), name) from None
            if not report.ok:
                raise DamagedBundle(f"damaged member {name}: the archive's own verification: {report.problems[0]}",
                                    name)
            out["archive"] = {"member": name, "blobs": report.blobs_checked, "exchanges": report.exchanges_checked}
        for run in contents.get("runs") or []:
            cas = run.get("cassette")
            if cas in bundle.resources:
                extract(bundle, tmp, cas)
                problems = verify_file(tmp / cas)
                if problems:
                    raise DamagedBundle(f"damaged member {cas}: {problems[0]}".replace(str(tmp / cas), cas), cas)
                out["cassettes"] += 1
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return out


def info(path) -> dict:
    """What a bundle holds (its structure is checked; member digests are not: see :func:`verify`)."""
    with open_bundle(path) as bundle:
        contents = bundle.manifest.get("contents") or {}
        sizes: dict[str, int] = {}
        for p, r in bundle.resources.items():
            part = p.split("/")[0] if "/" in p else p
            if part == "runs":
                part = "/".join(p.split("/")[:2])
            sizes[part] = sizes.get(part, 0) + r["bytes"]
        sig = bundle.digest.get("signature")
        runs = [dict(run, replay=_run_replay(bundle, run)) if isinstance(run, dict) else run
                for run in contents.get("runs") or []]
        return {"bundle": str(path), "title": bundle.manifest.get("title"), "software": bundle.manifest.get("software"),
                "version": bundle.manifest.get("version"), "members": len(bundle.resources),
                "bytes": sum(r["bytes"] for r in bundle.resources.values()), "file_bytes": bundle.path.stat().st_size,
                "archive": contents.get("archive"), "suite": contents.get("suite"), "runs": runs,
                "personas": contents.get("personas") or [], "context": contents.get("context") or {},
                "parts": dict(sorted(sizes.items())),
                "signed": isinstance(sig, dict)}


def _run_replay(bundle: Bundle, run: dict) -> dict | None:
    """A bundled run's replay provenance, from its report.json (eval/replay_provenance.py): how many
    episodes touched a fuzzy main document, a fuzzy XHR answer or a miss, and which; None when the
    run has no report or its report records none."""
    name = f"{run.get('path') or ''}report.json"
    zi = bundle.infos.get(name)
    if zi is None or not isinstance(run.get("path"), str):
        return None
    try:
        report = json.loads(_read_small(bundle.zf, zi, name))
    except (BundleError, ValueError):
        return None  # (info does not check members; verify says what is wrong with one)
    replay = report.get("replay") if isinstance(report, dict) else None
    if not isinstance(replay, dict):
        return None
    return {k: replay.get(k) for k in ("episodes", "compromised", "fuzzy_documents", "fuzzy_xhr", "misses")} | {
        "episodes_compromised": [e.get("task_id") for e in replay.get("episodes_compromised") or []
                                 if isinstance(e, dict)]}


def export_wacz(path, out, *, overwrite: bool = False, progress=None) -> int:
    """The bundle's archive as a WACZ (the archive's own export), its digest checked first."""
    with open_bundle(path) as bundle:
        name = (bundle.manifest.get("contents") or {}).get("archive")
        if name not in bundle.resources:
            raise BundleError(f"{path}: holds no archive")
        tmp = Path(tempfile.mkdtemp(prefix="webfreeze-bundle-wacz-"))
        try:
            extract(bundle, tmp, name)
            return export(tmp / name, out, "wacz", progress=progress, overwrite=overwrite)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
