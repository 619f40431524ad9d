"""Field conformance: every file under the folders given, through profkit, as a new user would.

    python benchmarks/field.py FOLDER... [--out benchmarks/results/field.md]

Each file is detected and loaded alone into a fresh database (a run of its own), then
labelled by profkit classify's rules (computed in memory, each label with its evidence).
Its row says format, tool version, GPU, kernels, NVTX ranges, counters and labels, or the
one line profkit answered instead. Each folder that holds files is also loaded the way
`profkit ingest FOLDER` does (one run, one report per role and rank, capture.json as run
metadata): the second table says what that took and skipped.

Outcomes: `loaded`; `no kernels` (a report whose file holds no kernel: the reason says why);
`needs tool` (nsys or ncu-report missing here); `refused` (a report profkit rejects: the
reason); `not a report` (no parser recognises it: notes, licences, pictures); `crash` (an
exception that is not one of profkit's errors: a bug).
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "benchmarks" / "results" / "field.md"
COLUMNS = ("file", "outcome", "format", "tool version", "GPU", "kernels", "ranges", "counters", "labels", "reason")


def _version(facts: dict) -> str | None:
    """The tool version a report records ({tool}_version facts: nsys_version, ncu_version, ...)."""
    for key in sorted(facts):
        if key.endswith("_version") and facts[key]:
            return f"{key[:-len('_version')].replace('_', ' ')} {facts[key]}"  # nsys_export_version: nsys export X
    return None


def check_file(path: Path, name: str, tmp: Path) -> dict:
    """One file through detect, ingest and labels, in a database of its own."""
    from profkit import parsers
    from profkit.analyses.classify import label_rows
    from profkit.core.errors import BadInput, ProfkitError, ToolMissing
    from profkit.store.ingest import ingest
    from profkit.store.store import Store

    row = {"file": name, "outcome": "", "format": None, "tool version": None, "GPU": None, "kernels": None,
           "ranges": None, "counters": None, "labels": None, "reason": None, "evidence": []}
    try:
        row["format"] = parsers.detect(path).FORMAT
    except BadInput as e:
        row.update(outcome="not a report", reason=e.problem.split(" (expected")[0])  # the list of formats: once, above
        return row
    db = tmp / "file.db"
    try:
        ingest(str(db), [path], run="field")
        with Store(db) as s:
            f = s.query("SELECT format, kernels, ranges, counters, facts FROM report_file")[0]
            facts = json.loads(f["facts"] or "{}")
            labels = label_rows(s, "field")
    except ToolMissing as e:
        row.update(outcome="needs tool", reason=str(e))
        return row
    except BadInput as e:
        # a report that holds no kernel, whatever the format says it in words (nsys: "no kernels (...)",
        # Kineto: "no GPU kernel among its N events")
        none = e.problem.startswith(("no kernels", "no GPU kernel"))
        row.update(outcome="no kernels" if none else "refused", reason=e.problem)
        return row
    except ProfkitError as e:
        row.update(outcome="refused", reason=str(e))
        return row
    except Exception as e:  # a bug: the row says so, the survey goes on
        row.update(outcome="crash", reason=_crash(e))
        return row
    finally:
        for p in tmp.glob(db.name + "*"):
            p.unlink()
    counts = Counter(r["label"] for r in labels)
    version = _version(facts) or f"{parsers.by_format(row['format']).SOURCE} (not recorded)"
    # an ncu details CSV names only the compute capability (profkit ingest --gpu NAME supplies the rest)
    gpu = facts.get("gpu_name") or (f"CC {facts['compute_capability']} (no name in the file)"
                                    if facts.get("compute_capability") else None)
    row.update(outcome="loaded", **{"tool version": version, "GPU": gpu},
               kernels=f["kernels"], ranges=f["ranges"], counters=f["counters"],
               labels=", ".join(f"{k} {n}" for k, n in sorted(counts.items(), key=lambda x: (-x[1], x[0]))),
               evidence=[json.loads(r["evidence"]) for r in labels])
    return row


def _crash(e: Exception) -> str:
    """An unexpected exception in one line: its first line and, for a child's traceback, its last."""
    lines = [x.strip() for x in f"{type(e).__name__}: {e}".splitlines() if x.strip()]
    return lines[0] + (f" ... {lines[-1]}" if len(lines) > 1 else "")


def check_folder(folder: Path, name: str, tmp: Path) -> dict:
    """A folder the way `profkit ingest FOLDER` loads it."""
    from profkit.core.errors import ProfkitError
    from profkit.store.ingest import ingest, plan

    row = {"folder": name, "runs": None, "taken": None, "skipped": None, "reason": None}
    db = tmp / "folder.db"
    try:
        groups = plan([folder])
        loaded = ingest(str(db), [], groups=groups)
        row.update(runs=", ".join(dict.fromkeys(g.run for g in groups)),
                   taken=", ".join(f"{Path(r.path).name} ({r.kernels} kernels)" for r in loaded),
                   skipped="; ".join(f"{p.name}: {why}" for g in groups for p, why in g.skipped) or None)
    except ProfkitError as e:
        row["reason"] = str(e)
    except Exception as e:
        row["reason"] = "crash: " + _crash(e)
    finally:
        for p in tmp.glob(db.name + "*"):
            p.unlink()
    return row


def survey(folders: list[Path], progress: bool = False) -> tuple[list[dict], list[dict]]:
    """(file rows, folder rows) for every file and every folder holding files under `folders`."""
    files, dirs = [], []
    for top in map(Path, folders):
        # names as a reader finds them: in the repository from its root, elsewhere from the folder's parent
        inside = top.resolve().is_relative_to(ROOT)
        top, base = (top.resolve(), ROOT) if inside else (top, top.parent)
        found = sorted(p for p in top.rglob("*") if p.is_file())
        files += [(p, p.relative_to(base).as_posix(), base) for p in found]
        dirs += [(d, d.relative_to(base).as_posix(), base) for d in sorted({p.parent for p in found})]
    rows, folder_rows = [], []
    with tempfile.TemporaryDirectory(prefix="profkit-field-") as d, _progress(progress) as bar:
        task = bar.add_task("field reports", total=len(files) + len(dirs))
        tmp = Path(d)
        for p, name, base in files:
            bar.update(task, description=name)
            rows.append(_relative(check_file(p, name, tmp), base))
            bar.advance(task)
        for p, name, base in dirs:
            bar.update(task, description=name)
            folder_rows.append(_relative(check_folder(p, name, tmp), base))
            bar.advance(task)
    return rows, folder_rows


def _relative(row: dict, base: Path) -> dict:
    """Reasons name files as the table does, not by where they lay on this machine."""
    if row.get("reason"):
        for b in {str(base), str(base.resolve())} - {"", "."}:
            row["reason"] = row["reason"].replace(b.rstrip("/") + "/", "")
        own = f"{row.get('file')}: "
        if row["reason"].startswith(own):  # the row names its file already
            row["reason"] = row["reason"][len(own):]
    return row


def _progress(show: bool):
    """A progress bar on a terminal, nothing when piped (or in a test)."""
    from rich.progress import Progress

    return Progress(transient=True, disable=not show)


def _cell(v) -> str:
    from profkit.outputs.tables import plain

    return "" if v is None else plain(v).replace("|", "\\|")


def header() -> dict:
    from profkit.core.environment import result_header

    info = result_header("cpu")
    rev = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    dirty = subprocess.run(["git", "-C", str(ROOT), "status", "--porcelain", "--untracked-files=no"],
                           capture_output=True, text=True)
    info["profkit_revision"] = (rev.stdout.strip() or "unknown") + (" (with local changes)" if dirty.stdout.strip() else "")
    try:  # the nsys ingest would use: $NSYS, else PATH
        from profkit.parsers.nsys_rep import _version, find_nsys
        exe = find_nsys()
        info["nsys"] = f"{exe} ({_version(exe)})"
    except Exception:
        info["nsys"] = "not installed"
    return info


def markdown(rows: list[dict], folder_rows: list[dict], folders: list[Path], info: dict) -> str:
    from profkit import parsers

    outcomes = Counter(r["outcome"] for r in rows)
    lines = ["# Field conformance: real reports other people captured, through profkit", "",
             f"Made by `python benchmarks/field.py {' '.join(str(f) for f in folders)}` on {info['date']}, "
             f"profkit revision {info['profkit_revision']}, python {info['python']}, host {info['host']}; "
             f"nsys here: {info['nsys']}.", "",
             "Each file loads alone into a fresh database and is labelled by `profkit classify`'s rules "
             "(every label carries its evidence); otherwise the row holds the one line profkit answers. "
             "Where the files came from: `SOURCES.md` beside them. Formats profkit reads here: "
             + "; ".join(f"{p.FORMAT} ({p.DESCRIPTION})" for p in parsers.registry()) + ".", "",
             "Outcomes: " + ", ".join(f"{k} {n}" for k, n in sorted(outcomes.items())) + f" ({len(rows)} files).", "",
             "| " + " | ".join(COLUMNS) + " |", "|" + "|".join("---:" if c in ("kernels", "ranges", "counters") else "---"
                                                        for c in COLUMNS) + "|"]
    lines += ["| " + " | ".join(_cell(r[c]) for c in COLUMNS) + " |" for r in rows]
    lines += ["", "## Folders, as `profkit ingest FOLDER` loads them", "",
              "| folder | run | taken | skipped | refused because |", "|---|---|---|---|---|"]
    lines += [f"| {_cell(r['folder'])} | {_cell(r['runs'])} | {_cell(r['taken'])} | {_cell(r['skipped'])} | "
              f"{_cell(r['reason'])} |" for r in folder_rows]
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("folders", nargs="+", type=Path)
    ap.add_argument("--out", type=Path, default=OUT)
    a = ap.parse_args(argv)
    missing = [f for f in a.folders if not f.is_dir()]
    if missing:
        print(f"field.py: no such folder: {', '.join(map(str, missing))}", file=sys.stderr)
        return 2
    rows, folder_rows = survey(a.folders, progress=sys.stdout.isatty())
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(markdown(rows, folder_rows, a.folders, header()))
    print(f"{a.out}: {len(rows)} files, " + ", ".join(f"{k} {n}" for k, n in sorted(Counter(r['outcome'] for r in rows).items())))
    return 0


if __name__ == "__main__":
    sys.exit(main())
