"""Load report files into the store: detect the format, skip what is already loaded
(content hash), parse, and write each file in one transaction.

A folder given to ingest is a capture folder (as `profkit capture` writes it, or any folder
of reports): one run named after it, its report files chosen one per role per rank, its
`capture.json` merged into the run's meta; files it does not take are named with the reason.
"""

from __future__ import annotations

import hashlib
import inspect
import os
import re
import sqlite3
from concurrent.futures import Future
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from profkit import parsers
from profkit.core import errors
from profkit.core.dbfile import open_readonly
from profkit.core.errors import BadArgument, BadInput, ProfkitError
from profkit.core.names import MAX_NAME, as_text, name_too_long
from profkit.core.nvtx import PathsTooLarge
from profkit.store.store import Store, what_is

CAPTURE_META = "capture.json"  # what `profkit capture` writes beside the reports

# a rank in a file name: run.rank1.nsys.sqlite, rank0.ncu-rep, trace_rank_3.sqlite (the last one counts)
_RANK = re.compile(r"(?:^|[._-])rank[_-]?(\d+)(?=[._-]|$)", re.I)


@dataclass
class Loaded:
    path: str
    run: str
    format: str
    skipped: bool
    kernels: int = 0
    ranges: int = 0
    counters: int = 0
    loaded_as: str | None = None  # the file that already holds these bytes
    rank: int | None = None
    rules: int = 0  # ncu guided-analysis results loaded (the rules view)
    caveat: str | None = None  # what the format could not prove about the file being whole
    gpu_note: str | None = None  # this file's GPU is not the one the run's other reports name


def _check_names(path: Path, report) -> None:
    """Refuse a name over MAX_NAME: every launch under a range repeats its name in the database,
    so one 24 MB name made a 1.2 GB database from a 25 MB file. (A report read as columns,
    report.bulk, is checked by its parser: its rows are not read here.)"""
    if getattr(report, "bulk", None) is not None:
        return

    def long(rows, cols):
        for r in rows:
            for i in cols:
                v = r[i]
                if isinstance(v, str) and len(v) > MAX_NAME:  # (paths are NvtxPath, a str)
                    return v
        return None

    v = long(report.kernels, (1, 2, 3, 4)) or long(report.ranges, (1, 8))
    if v is not None:
        raise BadInput(path, name_too_long(v))


def sha256_of(path: Path, progress=None) -> str:
    """progress(done, total): bytes hashed so far."""
    h = hashlib.sha256()
    total, done = Path(path).stat().st_size, 0
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 22), b""):
            h.update(chunk)
            done += len(chunk)
            if progress:
                progress(done, total)
    return h.hexdigest()


def _parse(parser, path: Path, on_progress=None):
    """parser.parse, telling on_progress(file, phase, done, total) where the parser can."""
    if on_progress and "progress" in inspect.signature(parser.parse).parameters:
        return parser.parse(path, progress=lambda phase, done, total: on_progress(path, phase, done, total))
    if on_progress:
        on_progress(path, "parsing", 0, None)
    return parser.parse(path)


MAX_RANK = 2**31 - 1  # a process rank; beyond it a number is no rank (and no SQLite integer)


def rank_in_name(path: Path) -> int | None:
    found = _RANK.findall(parsers.suffix_pattern().sub("", Path(path).name))
    if not found:
        return None
    if int(found[-1]) > MAX_RANK:
        raise BadInput(path, f"rank {found[-1][:24]} in the file name is beyond {MAX_RANK}: name the rank with --rank")
    return int(found[-1])


# names the tools give every file (nsys's report1, ncu's profile, ...): a run is named after
# its folder as well
_GENERIC = re.compile(
    r"^(report|profile|profiling|trace|output|out|result|results|capture|prof|timeline|"
    r"kineto|nsys|ncu|cupti)[._-]?\d*$",
    re.I,
)


def identity(path: Path) -> tuple:
    """What tells this file from another put in its place: device, inode, size, modification time."""
    st = os.stat(path)
    return st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns


def unchanged(path: Path, before: tuple | None) -> None:
    """Refuse a file replaced or rewritten since `before` (identity): its load, read in stages
    (sniffed, hashed, parsed, its rows copied again by the column path), would mix two files
    under one hash."""
    if before is None:
        return
    try:
        now_ = identity(path)
    except OSError:
        now_ = None
    if now_ != before:
        raise BadInput(
            path,
            "the file changed while it was loading (replaced or rewritten): nothing loaded; "
            "load it again once it is complete",
        )


def run_name_for(path: Path) -> str:
    """The run a file loads into by default: its name without report suffixes and rank
    (run.rank0.nsys.sqlite and run.rank1.nsys.sqlite both load into `run`)."""
    base = parsers.suffix_pattern().sub("", as_text(Path(path).name))
    m = list(_RANK.finditer(base))
    if m:
        base = (base[: m[-1].start()] + base[m[-1].end() :]).strip("._-")
    folder = as_text(Path(path).resolve().parent.name)
    if base and folder and _GENERIC.match(base):  # report1.sqlite of two experiments: two runs
        return f"{folder}-{base}"
    return base or folder or as_text(Path(path).stem)


def rank_of(path: Path, report, explicit: int | None = None) -> int | None:
    """explicit (--rank) > the rank the report recorded (RANK in an nsys capture's
    environment) > a rank in the file name > None (a single-process run)."""
    if explicit is not None:
        return explicit
    recorded = (report.facts or {}).get("rank")
    if recorded is not None:
        if not 0 <= int(recorded) <= MAX_RANK:
            raise BadInput(
                path,
                f"the recorded rank {str(recorded)[:24]} is not a process rank (0 to {MAX_RANK}): "
                "name the rank with --rank",
            )
        return int(recorded)
    return rank_in_name(path)


def _load(
    store: Store,
    path: Path,
    report,
    digest,
    run: str,
    rank: int | None,
    on_progress=None,
    guard=None,
    before_commit=None,
) -> Loaded:
    """digest: the file's sha256, or a _LateHash (the store resolves it); guard, before_commit:
    see add_report."""
    tell = (lambda phase, done, total: on_progress(path, phase, done, total)) if on_progress else None
    out = store.add_report(run, report, digest, rank, progress=tell, guard=guard, before_commit=before_commit)
    if out.get("skipped"):  # another process loaded the same bytes meanwhile
        return Loaded(as_text(path), run, report.format, True, rank=rank)
    return Loaded(
        as_text(path),
        run,
        report.format,
        False,
        out["kernels"],
        out["ranges"],
        out["counters"],
        rank=rank,
        rules=out.get("rules", 0),
        caveat=getattr(report, "caveat", None),
        gpu_note=_other_gpus(store, run, rank, (report.facts or {}).get("gpu_name")),
    )


def _other_gpus(store: Store, run: str, rank: int | None, gpu: str | None) -> str | None:
    """One line when this file's GPU is another model than one the run's other reports name
    (ranks of one job on an H100 and an A100): each launch is then labelled on its own GPU."""
    if not isinstance(gpu, str) or not gpu:
        return None
    others = store.conn.execute(
        "SELECT DISTINCT rank, json_extract(facts, '$.gpu_name') FROM report_file WHERE run = ? AND json_valid(facts)"
        " AND json_extract(facts, '$.gpu_name') IS NOT NULL AND json_extract(facts, '$.gpu_name') != ?",
        (run, gpu),
    ).fetchall()
    if not others:
        return None
    where = "this file" if rank is None else f"rank {rank}"
    them = ", ".join(sorted({f"{g}" + ("" if r is None else f" (rank {r})") for r, g in others}))
    return (
        f"{where} ran on {gpu}, the run's other reports on {them}: each launch is labelled with "
        "the peaks of the GPU its own report names"
    )


@dataclass
class Group:
    """Files that load into one run, with the run meta to merge (a folder's capture.json)."""

    run: str | None
    files: list[Path]
    meta: dict | None = None
    folder: Path | None = None
    skipped: list[tuple[Path, str]] = field(default_factory=list)  # (file, why) a folder did not take
    meta_file: Path | None = None  # the capture.json named on its own


def report_files(folder: Path, skipped: list | None = None) -> list[Path]:
    """One timeline and one counter file per rank (a single-process run has one rank: None),
    the most preferred format of each role first. `skipped`, if given, receives (path, why)
    for every other entry of the folder except capture.json."""
    found: dict[int | None, dict[str, list[Path]]] = {}
    others: list[tuple[Path, str]] = []
    for f in sorted(folder.iterdir()):
        if f.name == CAPTURE_META and f.is_file():
            continue
        if not f.is_file():
            others.append((f, "a folder" if f.is_dir() else "not a regular file"))
            continue
        try:
            fmt = parsers.detect(f).FORMAT
        except BadInput as e:
            if e.problem.startswith("cannot read it"):  # a report we may not read is not a note to skip
                raise
            others.append((f, _short(e.problem)))  # notes, logs, metric lists
            continue
        found.setdefault(rank_in_name(f), {}).setdefault(fmt, []).append(f)
    out: list[Path] = []
    for rank in sorted(found, key=lambda r: -1 if r is None else r):
        have = found[rank]
        # one file per role is enough: the nsys export beats its .nsys-rep (no nsys needed)
        for role in parsers.ROLES:
            fmts = [f for f in parsers.preference(role) if f in have]
            if not fmts:
                continue
            taken = have[fmts[0]][0]
            out.append(taken)
            why = f"one {role} report per {'process' if rank is None else 'rank'}: {taken.name} is taken"
            others += [(f, why) for fmt in fmts for f in have[fmt] if f != taken]
    if skipped is not None:
        skipped.extend(sorted(others))
    return out


def _short(problem: str) -> str:
    """A detection failure in a few words (the full one lists every format)."""
    return "unrecognised format" if problem.startswith("unrecognised format") else problem


def capture_meta(folder: Path) -> dict | None:
    """What `profkit capture` recorded beside the reports (GPU, versions, command, the
    workload's reference checks under `correctness`); merged into the run's meta."""
    path = Path(folder) / CAPTURE_META
    return read_meta(path) if path.is_file() else None


# the fields of capture.json profkit reads, and the JSON type each must have
_META_TYPES = {
    "sampling": (dict, "an object"),
    "correctness": (dict, "an object"),
    "command": (list, "a list"),
    "env": (dict, "an object"),
}


def read_meta(path: Path) -> dict:
    from profkit.core import jsonfile

    meta = jsonfile.load(path)
    if not isinstance(meta, dict):
        raise BadInput(path, "not a JSON object")
    for key, (kind, what) in _META_TYPES.items():
        if meta.get(key) is not None and not isinstance(meta[key], kind):
            raise BadInput(path, f'"{key}" is {type(meta[key]).__name__}, not {what}')
    return meta


def sampled_facts(files: list[Path], meta: dict | None) -> dict | None:
    """How ncu sampled a command capture (capture.json `sampling.ncu_filter`), as facts of its
    counters report: the store links the sampled launches with it."""
    spec = ((meta or {}).get("sampling") or {}).get("ncu_filter")
    if not isinstance(spec, dict):
        return None
    return {f: {"ncu_filter": spec} for f in files if parsers.detect(f).ROLE == "counters"}


def folder_group(folder: Path, run: str | None = None) -> Group:
    """A capture folder as one run: named after the folder (or `run`), its report files,
    its capture.json as meta. A folder with no report file is refused, naming what it holds."""
    folder = Path(folder)
    skipped: list[tuple[Path, str]] = []
    files = report_files(folder, skipped)
    meta = capture_meta(folder)  # read first: a bad capture.json loads nothing
    if not files:
        what = "; ".join(f"{p.name}: {why}" for p, why in skipped[:5]) or "it is empty"
        raise BadInput(folder, f"no report file profkit reads ({what}{'; ...' if len(skipped) > 5 else ''})")
    name = run or folder.resolve().name
    return Group(name, files, meta, folder, skipped)


def folder_groups(folder: Path, run: str | None = None) -> list[Group]:
    """A capture folder is one run; a folder without reports of its own whose sub-folders
    hold them (profiles/, as `profkit analyse` reads it) is one run per sub-folder."""
    try:
        return [folder_group(folder, run)]
    except BadInput as own:
        subs = [d for d in sorted(Path(folder).iterdir()) if d.is_dir() and report_files(d)]
        if not subs:
            raise own from None
    if run is not None:
        raise BadArgument(
            f"--run names one run, but {folder} holds {len(subs)} (one per sub-folder): "
            "leave --run out, or ingest one sub-folder"
        )
    return [folder_group(d) for d in subs]


def plan(paths: list[Path], run: str | None = None) -> list[Group]:
    """What one ingest call loads, as runs: the files named go to `run` (or the first file's
    name), a capture.json among them is that run's meta, and each folder is a run of its own
    (folder_groups)."""
    files, meta, meta_file, groups = [], None, None, []
    for p in map(Path, paths):
        if p.is_dir():
            groups.extend(folder_groups(p, run))
        elif p.name == CAPTURE_META and p.is_file():
            meta, meta_file = {**(meta or {}), **read_meta(p)}, p
        else:
            files.append(p)
    if files or meta is not None:
        # (meta and meta_file are set together)
        name = run or (run_name_for(files[0]) if files or meta_file is None else meta_file.resolve().parent.name)
        groups.insert(0, Group(name, files, meta, meta_file=meta_file))
    return groups


def _runs_of(db: str, store: Store | None = None) -> list[str]:
    """The runs a database holds, without creating it."""
    if store is not None:
        return store.runs()
    if not Path(db).exists():
        return []
    with Store(db) as s:
        return s.runs()


@contextmanager
def _opened(db: str, store: Store | None):
    """The caller's open Store (left open), else `db` opened here and closed on exit."""
    if store is not None:
        yield store
        return
    with Store(db) as s:
        yield s


def ingest(
    db: str,
    paths: list[Path],
    run: str | None = None,
    on_file=None,
    rank: int | None = None,
    parsed_reports: dict | None = None,
    facts: dict | None = None,
    on_progress=None,
    groups: list[Group] | None = None,
    store: Store | None = None,
    workers: int | None = None,
) -> list[Loaded]:
    """Ingest files in order. Every file is detected and parsed before any is written, so a
    bad file raises and leaves the database as it was; each file then loads in its own
    transaction.

    The files named go to one run: `run`, or the name of the first file; a folder is a run
    of its own (plan). A run takes one timeline and one counter report per rank, from this
    call or an earlier one: a second from another file is refused before anything is written
    (one_per_role). Each file's rank is `rank` if given, else found by rank_of (None for
    single-process runs). `parsed_reports` ({path: Parsed}) holds files a caller already
    parsed (capture does); `facts` ({path: dict}) adds what the caller knows of a file to its
    facts (capture: how ncu sampled, which the store needs to link its launches; a folder's
    capture.json says the same); `groups` is a plan already made (the CLI prints its skipped
    files); `store`: the caller's open Store of `db` (the main job keeps one), used and left
    open; `workers`: parser processes (default: one per core, from PARALLEL_FROM files to parse
    on; 1: parse here). on_file(Loaded) hears of each file as it lands; on_progress(file, phase,
    done, total) of the work on each (phases: hashing, the parser's, writing; total None: unknown).
    """
    groups = plan(paths, run) if groups is None else groups
    for g in groups:
        if g.run is not None:
            g.run = as_text(g.run)  # a name is text: undecodable bytes of a file name are replaced
    # parse everything before writing anything: one bad file leaves the database untouched
    # (and a database that did not exist is not created)
    parsed = []
    # Into a database holding no report, no file can be a repeat of one loaded before: each
    # file's hash is then taken in a thread of low priority (hashlib works without the GIL)
    # while the file is parsed and written, and the store checks it for repeats just before
    # COMMIT
    ahead = _Hashes() if not _holds_reports(db, store) else None
    opened: dict = {}  # file -> identity when first read, checked again before its COMMIT
    try:
        for g in groups:
            for p in g.files:
                try:
                    opened[p] = identity(p)
                except OSError:
                    pass  # (detect says why it cannot be read)
                parser = parsers.detect(p)
                hashed = (lambda done, total, p=p: on_progress(p, "hashing", done, total)) if on_progress else None
                parsed.append((g, p, parser, ahead.later(p) if ahead else sha256_of(p, hashed)))
        return _ingest_parsed(
            db, groups, parsed, run, on_file, rank, parsed_reports, facts, on_progress, store, workers, opened
        )
    finally:
        if ahead:
            ahead.close()


class _Hashes:
    """sha256 of files, one after the other in a thread of their own."""

    def __init__(self):
        from concurrent.futures import ThreadPoolExecutor

        # at the lowest priority: the hash waits for a core the parse and the writes leave idle
        # (it is needed only at COMMIT), never slowing the launch-call join or the writes
        self.pool = ThreadPoolExecutor(1, thread_name_prefix="profkit-hash", initializer=_lowest_priority)

    def later(self, path: Path) -> _LateHash:
        return _LateHash(self.pool, path).begin()

    def close(self) -> None:
        self.pool.shutdown(wait=True, cancel_futures=True)


def _lowest_priority() -> None:
    """This thread at nice 19 (Linux: a thread's own; elsewhere, where it fails: as it is)."""
    try:
        os.setpriority(os.PRIO_PROCESS, 0, 19)
    except (AttributeError, OSError):
        pass


class _LateHash:
    """A file's sha256, taken in the pool's thread from begin() on; result() waits for it
    (begun then if it was not). What Store.add_report takes for a hash it resolves late."""

    def __init__(self, pool, path: Path):
        self.pool, self.path = pool, path
        self.future: Future[str] | None = None

    def _started(self) -> Future[str]:
        if self.future is None:
            self.future = self.pool.submit(sha256_of, self.path)
        return self.future

    def begin(self) -> _LateHash:
        self._started()
        return self

    def result(self) -> str:
        return self._started().result()


def _holds_reports(db: str, store: Store | None = None) -> bool:
    """False only for a database that is missing, empty, or a profkit one without reports
    (looked at read-only: nothing is created or migrated before every file is parsed)."""
    if store is not None:
        return store.conn.execute("SELECT 1 FROM report_file LIMIT 1").fetchone() is not None
    what = what_is(db)
    if what in ("missing", "empty"):
        return False
    if what != "profkit":
        return True  # not ours: Store says so, in one line, when it opens it
    try:
        conn = open_readonly(db, peek=True)
        try:
            return conn.execute("SELECT 1 FROM report_file LIMIT 1").fetchone() is not None
        finally:
            conn.close()
    except sqlite3.Error:
        return True


def _ingest_parsed(
    db,
    groups,
    parsed,
    run,
    on_file,
    rank,
    parsed_reports,
    facts,
    on_progress,
    store: Store | None,
    workers: int | None = None,
    opened: dict | None = None,
) -> list[Loaded]:
    alone = [g for g in groups if g.meta is not None and not g.files]
    if alone:  # a capture.json without reports: metadata of a run already loaded, or nothing
        have = _runs_of(db, store)
        for g in alone:
            if g.run not in have:
                raise BadInput(
                    g.meta_file,
                    f"run metadata, not a report, and run {g.run!r} is not loaded: "
                    "ingest it with its reports (or their folder)",
                )
    seen, held = {}, []
    if store is not None or Path(db).exists():
        # a read-only look: opening the writer switches the journal (a header write) before
        # anything is known to load, and a refused file must leave the database byte-identical
        look = store if store is not None or what_is(db) != "profkit" else Store(db, readonly=True)
        with _opened(db, look) as s:
            seen = {digest: s.has_file(digest) for *_, digest in parsed if isinstance(digest, str)}
            held = _held(s.conn, {g.run for g in groups if g.files})
        if look is not None and look is not store:
            look.close()
    out, todo = [], []
    fresh = [
        (p, parser)
        for g, p, parser, digest in parsed
        if not (isinstance(digest, str) and seen.get(digest)) and (parsed_reports or {}).get(p) is None
    ]
    early = _parse_in_processes(fresh, workers, on_progress)
    for g, p, parser, digest in parsed:
        if isinstance(digest, str) and seen.get(digest):
            out.append(Loaded(as_text(p), seen[digest][0], parser.FORMAT, True, loaded_as=seen[digest][1]))
            if on_file:
                on_file(out[-1])
        else:
            known = (parsed_reports or {}).get(p)
            known = early.get(p) if known is None else known
            try:
                report = known if known is not None else _parse(parser, p, on_progress)
            except PathsTooLarge as e:
                raise BadInput(p, str(e)) from None
            _check_names(p, report)
            report.path = as_text(p)
            todo.append((g, p, report, digest))
    one_per_role(todo, {p: parser.ROLE for _, p, parser, _ in parsed}, rank, held)
    if not todo and not any(g.meta for g in groups):
        return out
    if len(todo) > 1:  # a column-path report finishes its kernels in a thread: all proven whole before any write
        for *_, report, _ in todo:
            if report.bulk is not None:
                report.bulk.kernel_part()
    new = store is None and what_is(db) == "missing"
    try:
        return _write(db, store, todo, groups, out, rank, facts, on_file, on_progress, opened or {})
    except BaseException:
        if new:  # one report, refused while it loaded (its kernels' part): no database left behind
            _discard_empty(db)
        raise


PARALLEL_FROM = 8  # files to parse before a pool of processes pays for its start (~1 s a worker)
# a file over this is parsed here: a large report is read as columns (its rows stay lazy, in the
# process that writes them), and pickling a big one back would cost what the pool saves
POOL_MAX_BYTES = 16 << 20


def _parse_one(path: Path):
    """In a worker: (report, None), (None, None) for a report read as columns (its lazy rows stay
    in the process that writes them: parsed again there), or (None, (kind, text)) for a refusal
    (BadInput does not survive pickling as itself)."""
    try:
        report = parsers.detect(path).parse(path)
    except PathsTooLarge as e:
        return None, ("bad", str(e))
    except BadInput as e:
        return None, ("bad", e.problem)
    except ProfkitError as e:
        return None, (type(e).__name__, str(e))
    return (None, None) if getattr(report, "bulk", None) is not None else (report, None)


def _parse_in_processes(files, workers: int | None, on_progress=None) -> dict:
    """{path: Parsed} of `files` ((path, parser)), parsed in a process pool; {} where a pool
    does not pay (few files, one core, workers=1). Writing stays in this process, through the
    one store writer, one file one transaction; a refusal of any file raises here, before any
    write."""
    files = [(p, parser) for p, parser in files if _size(p) <= POOL_MAX_BYTES]
    n = workers if workers is not None else (os.cpu_count() or 1) if len(files) >= PARALLEL_FROM else 1
    n = min(n, len(files))
    if n <= 1:
        return {}
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    done = {}
    # spawn, not fork: the hashing thread and any caller's threads are not copied half-way
    with ProcessPoolExecutor(n, mp_context=multiprocessing.get_context("spawn")) as pool:
        futures = {}
        for p, _ in files:
            if on_progress:
                on_progress(p, "parsing", 0, None)
            futures[p] = pool.submit(_parse_one, Path(p))
        try:
            for p, f in futures.items():
                report, refused = f.result()
                if refused is not None:
                    kind, text = refused
                    if kind == "bad":
                        raise BadInput(p, text)
                    raise getattr(errors, kind, ProfkitError)(text)  # ToolMissing keeps its exit code
                if report is not None:
                    done[p] = report
        except BaseException:
            for f in futures.values():
                f.cancel()
            raise
    return done


def _size(path) -> int:
    try:
        return Path(path).stat().st_size
    except OSError:
        return 0


def _held(conn, runs) -> list[tuple[str, int | None, str, str, str]]:
    """(run, rank, format, path, sha256) of each report the database holds in these runs."""
    runs = sorted(r for r in runs if r is not None)
    if not runs:
        return []
    return [
        tuple(r)
        for r in conn.execute(
            f"SELECT run, rank, format, path, sha256 FROM report_file WHERE run IN ({','.join('?' * len(runs))}) "
            "ORDER BY id",
            runs,
        )
    ]


def _role_of(fmt: str) -> str | None:
    try:
        return parsers.by_format(fmt).ROLE
    except KeyError:  # a format whose parser is gone: nothing to compare it with
        return None


def _same_bytes(a: Path, a_digest, b: Path, b_digest) -> bool:
    """The same file named twice, or two copies of it (the second is then skipped as a repeat)."""
    if Path(a).resolve() == Path(b).resolve():
        return True
    digest = [d if isinstance(d, str) else d.result() for d in (a_digest, b_digest)]  # (a late hash: waited for)
    return digest[0] == digest[1]


def one_per_role(todo, roles: dict, rank: int | None, held=()) -> None:
    """One timeline and one counter file per run and rank, as report_files takes a folder, for
    files named one by one too: refuse (one line, before anything is written) a plan that gives
    a run and rank a second report of a role from another file, in this ingest (two exports both
    named report2.sqlite would both go to run report2) or from an earlier one (`held`: (run,
    rank, format, path) of the reports the database holds). The same bytes again are not
    another file: they are skipped as a repeat. `todo`: (group, path, parsed report, digest) of
    the files to write; `roles`: each path's role; `rank`: --rank, or None. Called before
    parsing and again inside each file's write transaction (_write), where `held` may hold what
    another process loaded meanwhile."""
    taken: dict[tuple, tuple[Path, str | _LateHash]] = {}
    for g, p, report, digest in todo:
        key = (g.run, rank_of(p, report, rank), roles[p])
        if key not in taken:
            taken[key] = (p, digest)
        elif not _same_bytes(*taken[key], p, digest):
            run, r, role = key
            raise BadArgument(
                f"two {role} reports for run {run!r}{_per(r)}: {as_text(taken[key][0])} and "
                f"{as_text(p)}; ingest each as a run of its own (--run NAME) or, if they are "
                "ranks of one job, each with its --rank N"
            )
    for run, r, fmt, path, sha in held:
        key = (run, r, _role_of(fmt))
        if key in taken:
            p, digest = taken[key]
            if (digest if isinstance(digest, str) else digest.result()) == sha:
                continue  # these very bytes, loaded meanwhile by another process: the store skips a repeat
            again = as_text(Path(p).resolve()) == as_text(Path(path).resolve())
            raise BadArgument(
                f"run {run!r} already holds a {key[2]} report{_per(r)}, {path}, loaded earlier: "
                + (f"{as_text(p)} has changed since" if again else f"{as_text(p)} is another file")
                + "; ingest it as a run of its own (--run NAME)"
                + ("" if again else " or, if it is another rank of that job, with its --rank N")
            )


def roles_held(db, run: str) -> set[str]:
    """The roles ("timeline", "counters") run `run` already holds in database `db`: none where
    the file or the run is missing. (capture asks before it profiles: a report of a role the run
    already has would be refused when loaded, after the program's whole run.)"""
    if what_is(db) != "profkit":
        return set()
    with Store(db, readonly=True) as s:
        return {role for _, _, fmt, _, _ in _held(s.conn, [run]) if (role := _role_of(fmt))}


def _per(rank: int | None) -> str:
    return " (one per process)" if rank is None else f" rank {rank} (one per rank)"


def _discard_empty(db: str) -> None:
    """Remove the database this ingest created, if it holds no report."""
    if what_is(db) == "profkit" and not _holds_reports(db):
        for suffix in ("", "-wal", "-shm", "-journal"):
            Path(db + suffix).unlink(missing_ok=True)


def _write(db, store, todo, groups, out, rank, facts, on_file, on_progress, opened: dict) -> list[Loaded]:
    with _opened(db, store) as store:
        for g, p, report, digest in todo:
            extra = {**(sampled_facts(g.files, g.meta) or {}), **(facts or {})}.get(p)
            if extra:
                report.facts = {**(report.facts or {}), **extra}

            # one_per_role again inside the file's write transaction: another process may have
            # loaded a report of this role into the run since the check before parsing
            def guard(conn, g=g, p=p, report=report, digest=digest):
                one_per_role([(g, p, report, digest)], {p: _role_of(report.format)}, rank, _held(conn, {g.run}))

            # a file replaced since it was read is refused before its write; the column path
            # reads its kernel rows again while it writes, so a replacement during the write
            # fails there (a constraint, a malformed page) and is named as what it is
            unchanged(p, opened.get(p))
            try:
                loaded = _load(
                    store,
                    p,
                    report,
                    digest,
                    g.run,
                    rank_of(p, report, rank),
                    on_progress,
                    guard,
                    lambda p=p: unchanged(p, opened.get(p)),
                )
            except ProfkitError:
                raise
            except Exception:
                unchanged(p, opened.get(p))
                raise
            release = getattr(report, "release", None)  # a scratch export the store read (nsys_rep)
            if release is not None:
                release()
            out.append(loaded)
            if on_file:
                on_file(loaded)
        for g in groups:
            if g.meta:
                store.set_run_meta(g.run, g.meta)
        return out
