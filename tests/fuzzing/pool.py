"""Running cases: one case in a worker (ingest, then the invariants), and a pool of worker
processes with a per-case time limit, so a hang or a dying worker is counted, not fatal."""
from __future__ import annotations

import hashlib
import json
import os
import selectors
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path

from .cases import BASE_FILES, BASE_RUN, FORMATS, ROOT, TRUNCATIONS, seed_bytes
from .invariants import check_whole_file, snapshot
from .mutators import build_file, replacement, secret_of

_FULL: dict = {}
_BULK_MIN_ROWS = __import__("profkit.parsers.nsys_sqlite", fromlist=["x"]).BULK_MIN_ROWS
_SIDE_MIN_KERNELS = __import__("profkit.core.rows", fromlist=["x"]).SIDE_MIN_KERNELS


def seed_counts(case: dict, folder: Path):
    """(kernels, ranges, counters) of the unmutated seed, parsed once per worker; None when the
    seed itself cannot be parsed here (a .nsys-rep without nsys)."""
    key = (case["format"], case["seed"])
    if key not in _FULL:
        from profkit import parsers
        from profkit.core.errors import ProfkitError

        p = folder / ("seed" + FORMATS[case["format"]][0])
        p.write_bytes(seed_bytes(case["seed"]))
        try:
            rep = parsers.detect(p).parse(p)
            _FULL[key] = (len(rep.kernels), len(rep.ranges), len(rep.counters))
        except ProfkitError:
            _FULL[key] = None
        finally:
            p.unlink()
    return _FULL[key]


def _is_truncation(case: dict) -> bool:
    return case["mutation"] in TRUNCATIONS or (case["mutation"] == "raw_then_xz" and case["p"]["inner"] in TRUNCATIONS)


def _digest(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()

def _replace(path: Path, new: bytes, how: str) -> None:
    """Put `new` where `path` is, as a tool would: a new file renamed over it (a new inode),
    rewritten in place (same inode), rewritten in place at the same size, or appended to."""
    if how == "rename":
        tmp = path.with_name(path.name + ".part")
        tmp.write_bytes(new)
        os.replace(tmp, path)
    elif how == "rewrite":
        with open(path, "wb") as f:
            f.write(new)
    elif how == "rewrite_same_size":
        size = path.stat().st_size
        with open(path, "r+b") as f:
            f.write((new + bytes(size))[:size])
    else:
        with open(path, "ab") as f:
            f.write(new[:4096] or b"x")


class _ReplaceMidLoad:
    """Replaces the case's file once, at its stage of the ingest (after the format is detected,
    after it is parsed, or as the store starts writing it), by wrapping that step."""

    def __init__(self, case: dict, path: Path):
        import profkit.parsers
        import profkit.store.ingest as ingest_mod
        from profkit.store.store import Store

        self.path, self.how, self.fired = path, case["p"]["how"], False
        self.new = replacement(case, path.read_bytes())
        stage = case["p"]["stage"]
        self.target, self.attr = {"after_detect": (profkit.parsers, "detect"), "after_parse": (ingest_mod, "_parse"),
                                  "at_write": (Store, "add_report")}[stage]
        self.orig = getattr(self.target, self.attr)
        before = stage == "at_write"
        hook = self

        def wrapped(*a, **kw):
            if before:
                hook.fire()
            out = hook.orig(*a, **kw)
            if not before:
                hook.fire()
            return out

        setattr(self.target, self.attr, wrapped)

    def fire(self) -> None:
        if not self.fired:
            self.fired = True
            _replace(self.path, self.new, self.how)

    def close(self) -> None:
        setattr(self.target, self.attr, self.orig)


def _whole_of_one(db: Path, path: Path, original: bytes, digest: str, res: dict) -> str | None:
    """After a load of a file replaced mid-load: what was stored must be one file whole (its
    hash and its rows' counts), the one before or the one after; None if so."""
    from profkit import parsers
    from profkit.core.errors import ProfkitError

    c = sqlite3.connect(db)
    try:
        stored = c.execute("SELECT sha256 FROM report_file ORDER BY id DESC LIMIT 1").fetchone()[0]
    finally:
        c.close()
    now = _digest(path)
    tmp = path.with_name("whole" + "".join(path.suffixes))
    options = []
    for h, data in ((digest, original), (now, path.read_bytes())):
        tmp.write_bytes(data)
        try:
            rep = parsers.detect(tmp).parse(tmp)
            options.append((h, [len(rep.kernels) + len(rep.extra_kernels), len(rep.ranges), len(rep.counters)]))
        except ProfkitError:
            pass
        finally:
            tmp.unlink()
    if any(stored == h and res["loaded"] == n for h, n in options):
        return None
    return f"loaded {res['loaded']} under hash {stored[:12]}: neither file whole ({options})"


def _secret_leak(db: Path, core: str, res: dict) -> str | None:
    """Where any 12 characters of a planted secret appear: a message, or any cell of any table."""
    windows = {core[i : i + 12] for i in range(len(core) - 11)}

    def has(text) -> bool:
        if isinstance(text, bytes):
            text = text.decode("utf-8", "replace")
        return isinstance(text, str) and any(w in text for w in windows)

    for key in ("error", "caveat"):
        if has(res.get(key)):
            return f"the {key} message"
    c = sqlite3.connect(db)
    try:
        for (t,) in c.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall():
            for row in c.execute(f'SELECT * FROM "{t}"'):
                if any(has(v) for v in row):
                    return f"table {t}"
    finally:
        c.close()
    return None

# --- worker ----------------------------------------------------------------------------------------

def run_case(case: dict, work: Path, template: Path, before: dict) -> dict:
    """Build, ingest, check one case. Runs in a worker process (or in-process for --replay)."""
    from profkit.parsers import nsys_sqlite

    import profkit
    from profkit.core import rows
    from profkit.core.errors import ProfkitError
    from profkit.store.ingest import ingest

    # the column path (ingest at scale, with its side writer) or the row path, whatever the
    # export's size
    nsys_sqlite.BULK_MIN_ROWS = 0 if case.get("column_path") else _BULK_MIN_ROWS
    rows.SIDE_MIN_KERNELS = 0 if case.get("column_path") else _SIDE_MIN_KERNELS

    folder = work / f"c{case['id']}"
    folder.mkdir()
    tmp = work / "tmp"
    res = {"id": case["id"], "outcome": None}
    t0 = time.perf_counter()
    try:
        try:
            path = build_file(case, folder)
        except Exception as e:  # a mutation that does not apply to this seed: not a profkit case
            res.update(outcome="not_built", error=f"{type(e).__name__}: {e}"[:300])
            return res
        db = folder / "db.sqlite"
        shutil.copy(template, db)
        run = BASE_RUN if case["into_existing_run"] else None
        digest, beside = _digest(path), sorted(os.listdir(folder))
        live = _ReplaceMidLoad(case, path) if case["mutation"] == "replaced_mid_load" else None
        original = path.read_bytes() if live else b""
        try:
            loaded = ingest(str(db), [path], run=run)
            res["outcome"] = "skipped" if loaded[0].skipped else "loaded"
            res["loaded"] = [loaded[0].kernels, loaded[0].ranges, loaded[0].counters]
            res["caveat"] = loaded[0].caveat
        except ProfkitError as e:
            res["outcome"] = "rejected"
            res["error"] = f"{type(e).__name__}: {e}"[:300]
            res["multiline"] = "\n" in str(e).strip()
        except BaseException as e:  # noqa: BLE001 - that is what we count
            import profkit.parsers

            ours = (Path(profkit.__file__).resolve().parent, Path(profkit.parsers.__file__).resolve().parent)
            tb = traceback.extract_tb(e.__traceback__)  # the innermost frame in profkit's own code
            where = next((f"{Path(f.filename).name}:{f.lineno}" for f in reversed(tb)
                          if Path(f.filename).resolve().parent in ours), None)
            res.update(outcome="crash", error=f"{type(e).__name__}: {e}"[:300], where=where,
                       traceback="".join(traceback.format_exception(e))[-3000:])
        finally:
            if live:
                live.close()
        res["ingest_s"] = round(time.perf_counter() - t0, 4)
        if live and live.fired:
            res["replaced"] = True
            if res["outcome"] == "loaded":  # never a mix of the two files under one hash
                mixed = _whole_of_one(db, path, original, digest, res)
                if mixed:
                    res["mixed_load"] = mixed
        if case["mutation"] == "secret":
            leak = _secret_leak(db, secret_of(case["p"])[0], res)
            if leak:
                res["secret_leak"] = leak
        # the database: unchanged after a failure, one whole new file after a success
        if res["outcome"] == "loaded":
            problem = check_whole_file(db, template, run or "case", existed=run is not None)
        else:
            problem = None if snapshot(db) == before else "database changed by a failed or skipped ingest"
        if problem:
            res["partial"] = problem
        # the report is read, never written: same bytes, nothing left beside it (no -wal/-shm)
        if _digest(path) != digest and not (live and live.fired):  # (a replaced file changed by the case)
            res["input_changed"] = True
        left = sorted(set(os.listdir(folder)) - set(beside))
        if left:
            res["sidecar"] = left[:5]
        # a cut copy loads whole, is refused, or says what its format cannot prove: never fewer
        # launches without a word
        if res["outcome"] == "loaded" and _is_truncation(case) and not res.get("caveat"):
            full = seed_counts(case, folder)
            if full is not None and tuple(res["loaded"]) != full:
                res["silent_partial"] = {"loaded": res["loaded"], "whole": list(full)}
        # profkit's scratch root ($TMPDIR/profkit-<uid>) stays; anything inside it is left over
        leftovers = []
        for p in sorted(tmp.iterdir()):
            if p.is_dir() and p.name.startswith("profkit-"):
                leftovers += [str(q.relative_to(tmp)) for q in sorted(p.iterdir())]
            else:
                leftovers.append(p.name)
        if leftovers:
            res["temp_left"] = leftovers[:5]
            for f in leftovers:
                if (tmp / f).is_dir():
                    shutil.rmtree(tmp / f, ignore_errors=True)
                elif (tmp / f).exists():
                    (tmp / f).unlink()
        return res
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def make_template(work: Path) -> Path:
    from profkit.store.ingest import ingest

    db = work / "template.db"
    ingest(str(db), [ROOT / f for f in BASE_FILES], run=BASE_RUN)
    return db


def worker_main(work: str) -> None:
    work_p = Path(work)
    (work_p / "tmp").mkdir(exist_ok=True)
    os.environ["TMPDIR"] = str(work_p / "tmp")
    tempfile.tempdir = str(work_p / "tmp")
    try:  # a mutation that makes a reader allocate without bound must fail, not take the machine
        import resource
        resource.setrlimit(resource.RLIMIT_AS, (8 << 30, 8 << 30))
    except (ImportError, ValueError, OSError):
        pass
    template = work_p / "template.db"
    before = snapshot(template)
    # the protocol gets its own copy of stdout; whatever the libraries print (Python or
    # native code) goes to stderr
    out = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    out.write("ready\n")
    out.flush()
    for line in sys.stdin:
        case = json.loads(line)
        res = run_case(case, work_p, template, before)
        out.write(json.dumps(res) + "\n")
        out.flush()


# --- parent: pool of workers with a per-case time limit --------------------------------------------

class Worker:
    def __init__(self, work: Path, template: Path, n: int):
        self.dir = work / f"w{n}"
        shutil.rmtree(self.dir, ignore_errors=True)
        self.dir.mkdir(parents=True)
        shutil.copy(template, self.dir / "template.db")
        tests = str(Path(__file__).resolve().parents[1])  # the folder holding this package
        env = dict(os.environ, PYTHONHASHSEED="0",
                   PYTHONPATH=os.pathsep.join([tests] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]))
        self.proc = subprocess.Popen([sys.executable, "-m", "fuzzing", "--worker", str(self.dir)],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                     text=True, bufsize=1, env=env, cwd=str(self.dir))
        assert self.proc.stdout.readline().strip() == "ready"
        self.case: dict | None = None
        self.deadline = 0.0

    def send(self, case: dict, timeout: float) -> None:
        self.case, self.deadline = case, time.monotonic() + timeout
        self.proc.stdin.write(json.dumps(case) + "\n")
        self.proc.stdin.flush()

    def kill(self) -> None:
        try:
            self.proc.kill()
        except OSError:
            pass
        self.proc.wait()
        shutil.rmtree(self.dir, ignore_errors=True)


def run_cases(cases: list[dict], workers: int = 2, timeout: float = 20.0, progress=None,
              deadline: float | None = None) -> list[dict]:
    """Each case's result, in the order they finish. Past `deadline` (time.monotonic()) no new
    case starts: those running finish, the rest are not run."""
    results: list[dict] = []
    with tempfile.TemporaryDirectory(prefix="profkit-fuzz-") as d:
        work = Path(d)
        template = make_template(work)
        pool = [Worker(work, template, i) for i in range(workers)]
        spawned = workers
        sel = selectors.DefaultSelector()
        for w in pool:
            sel.register(w.proc.stdout, selectors.EVENT_READ, w)
        todo = list(reversed(cases))

        def more() -> bool:
            if deadline is not None and time.monotonic() > deadline:
                todo.clear()
            return bool(todo)

        def replace(w: Worker) -> Worker:
            nonlocal spawned
            sel.unregister(w.proc.stdout)
            w.kill()
            nw = Worker(work, template, spawned)
            spawned += 1
            sel.register(nw.proc.stdout, selectors.EVENT_READ, nw)
            pool[pool.index(w)] = nw
            return nw

        for w in pool:
            if todo:
                w.send(todo.pop(), timeout)
        while any(w.case for w in pool):
            now = time.monotonic()
            wait = max(0.05, min(w.deadline for w in pool if w.case) - now)
            for key, _ in sel.select(wait):
                w = key.data
                line = w.proc.stdout.readline()
                try:
                    res = json.loads(line) if line else None
                except ValueError:  # something wrote into the protocol: count it against the case
                    res = {"id": w.case["id"], "outcome": "crash", "error": f"garbage from worker: {line[:200]!r}",
                           "where": "worker"}
                    w = replace(w)
                if res is None:  # the worker died inside a case: a crash (signal or abort in native code)
                    rc = w.proc.wait()
                    res = {"id": w.case["id"], "outcome": "crash", "error": f"worker died (exit {rc})",
                           "where": "worker"}
                    w = replace(w)
                w.case = None
                results.append(res)
                if progress:
                    progress(len(results), len(cases))
                if more():
                    w.send(todo.pop(), timeout)
            now = time.monotonic()
            for w in list(pool):
                if w.case and now > w.deadline:
                    results.append({"id": w.case["id"], "outcome": "hang", "error": f"no answer in {timeout} s"})
                    nw = replace(w)
                    if more():
                        nw.send(todo.pop(), timeout)
        for w in pool:
            sel.unregister(w.proc.stdout)
            w.proc.stdin.close()
            w.kill()
    return results
