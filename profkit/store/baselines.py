"""Named baselines for `profkit gate`: what a gate needs of a run, kept in the database and as a
small JSON file a repository can commit.

A baseline holds, per NVTX range, the GPU time (and host time) of each call and the dominant
label, and per kernel inside the range the GPU time of each call and its label, plus the run's
comparability facts (GPU, driver, clocks, tool versions, workload shape and variant set). It
holds no reference to the run: the run may be deleted, or never loaded where the baseline is
imported.
"""

from __future__ import annotations

import json
import sqlite3
import time
from dataclasses import dataclass, field
from pathlib import Path

from profkit.core.errors import BadArgument, BadInput
from profkit.store.store import Store
from profkit.store.transaction import transaction

FORMAT = "profkit-baseline"
VERSION = 1
_DIGITS = 4  # microseconds to 0.1 ns: below any timer's resolution, and the file stays small


@dataclass
class KernelSamples:
    name: str
    gpu_us: list[float]  # this kernel's GPU time in each call of its range
    label: str | None = None


@dataclass
class RangeSamples:
    path: str
    gpu_us: list[float]  # GPU time of each call
    host_us: list[float] | None = None  # host time of each call but the last (None: no API times)
    label: str | None = None
    kernels: list[KernelSamples] = field(default_factory=list)

    def times(self, by: str) -> list[float] | None:
        return self.gpu_us if by == "gpu" else self.host_us


@dataclass
class Baseline:
    name: str
    run: str
    created_at: str
    facts: dict
    ranges: list[RangeSamples]

    def summary(self) -> dict:
        calls = [len(r.gpu_us) for r in self.ranges]
        return {
            "name": self.name,
            "run": self.run,
            "created_at": self.created_at,
            "ranges": len(self.ranges),
            "calls": f"{min(calls)}-{max(calls)}"
            if calls and min(calls) != max(calls)
            else (str(calls[0]) if calls else "0"),
            "gpu": self.facts.get("gpu"),
            "driver": self.facts.get("driver"),
        }


def check_name(name: str) -> str:
    if not name or not name.strip() or any(c in name for c in "\n\r\t") or len(name) > 200:
        raise BadArgument(f"bad baseline name {name!r}: one line of text, at most 200 characters")
    return name


def save(store: Store, b: Baseline, replace: bool = False) -> None:
    """Write a baseline in one transaction; an existing name is refused unless `replace`."""
    check_name(b.name)
    c = store.conn
    with transaction(c):
        if c.execute("SELECT 1 FROM baseline WHERE name = ?", (b.name,)).fetchone():
            if not replace:
                raise BadArgument(
                    f"baseline {b.name!r} exists in {store.path}: --replace to write over it, or "
                    f"`profkit baseline rm {b.name}` first"
                )
            c.execute("DELETE FROM baseline_sample WHERE name = ?", (b.name,))
            c.execute("DELETE FROM baseline WHERE name = ?", (b.name,))
        c.execute(
            "INSERT INTO baseline (name, run, created_at, facts) VALUES (?, ?, ?, ?)",
            (b.name, b.run, b.created_at, json.dumps(b.facts, sort_keys=True)),
        )
        rows, seq = [], 0
        for r in b.ranges:
            rows.append((b.name, r.path, "", seq, r.label, _dump(r.gpu_us), _dump(r.host_us)))
            seq += 1
            for k in r.kernels:
                rows.append((b.name, r.path, k.name, seq, k.label, _dump(k.gpu_us), None))
                seq += 1
        c.executemany(
            "INSERT INTO baseline_sample (name, range_path, kernel, seq, label, gpu_us, host_us) "
            "VALUES (?, ?, ?, ?, ?, ?, ?)",
            rows,
        )


def load(store: Store, name: str) -> Baseline:
    head = store.query("SELECT name, run, created_at, facts FROM baseline WHERE name = ?", (name,))
    if not head:
        have = names(store)
        raise BadArgument(
            f"no baseline {name!r} in {store.path}; baselines: {', '.join(have) or 'none'} "
            f"(profkit baseline save NAME --run RUN, or baseline import FILE)"
        )
    h = head[0]
    ranges: dict[str, RangeSamples] = {}
    for r in store.query(
        "SELECT range_path, kernel, label, gpu_us, host_us FROM baseline_sample WHERE name = ? ORDER BY seq", (name,)
    ):
        if r["kernel"] == "":
            ranges[r["range_path"]] = RangeSamples(
                r["range_path"], json.loads(r["gpu_us"]), json.loads(r["host_us"]) if r["host_us"] else None, r["label"]
            )
        else:
            ranges[r["range_path"]].kernels.append(KernelSamples(r["kernel"], json.loads(r["gpu_us"]), r["label"]))
    return Baseline(h["name"], h["run"], h["created_at"], json.loads(h["facts"] or "{}"), list(ranges.values()))


def names(store: Store) -> list[str]:
    return [r["name"] for r in store.query("SELECT name FROM baseline ORDER BY created_at, name")]


def listing(store: Store) -> list[dict]:
    return [load(store, n).summary() for n in names(store)]


def remove(store: Store, name: str) -> None:
    load(store, name)  # refuses an unknown name with the list of known ones
    c = store.conn
    with transaction(c):
        c.execute("DELETE FROM baseline_sample WHERE name = ?", (name,))
        c.execute("DELETE FROM baseline WHERE name = ?", (name,))


# --- the file -------------------------------------------------------------------------------


def to_json(b: Baseline) -> dict:
    return {
        "format": FORMAT,
        "version": VERSION,
        "name": b.name,
        "run": b.run,
        "created_at": b.created_at,
        "facts": b.facts,
        "ranges": [
            {
                "path": r.path,
                "label": r.label,
                "gpu_us": _round(r.gpu_us),
                "host_us": _round(r.host_us),
                "kernels": [{"name": k.name, "label": k.label, "gpu_us": _round(k.gpu_us)} for k in r.kernels],
            }
            for r in b.ranges
        ],
    }


def export(store: Store, name: str, path: str | Path) -> Path:
    b = load(store, name)
    path = Path(path)
    tmp = path.with_name(path.name + ".part")
    tmp.write_text(json.dumps(to_json(b), indent=1) + "\n", encoding="utf-8")
    tmp.replace(path)  # a killed export leaves no half-written file under the name
    return path


def read(path: str | Path) -> Baseline:
    """A baseline file, checked: its format and version, then every field the gate reads."""
    path = Path(path)
    try:
        obj = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise BadInput(path, "no such file") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise BadInput(path, f"not a profkit baseline file (not JSON: {e})") from None
    if not isinstance(obj, dict) or obj.get("format") != FORMAT:
        raise BadInput(path, f'not a profkit baseline file (no "format": "{FORMAT}")')
    if obj.get("version") != VERSION:
        raise BadInput(
            path,
            f"baseline file version {obj.get('version')!r}; this profkit reads version {VERSION} "
            f"(export it again with this profkit, or upgrade profkit)",
        )
    try:
        ranges = []
        for r in obj["ranges"]:
            ranges.append(
                RangeSamples(
                    str(r["path"]),
                    _floats(r["gpu_us"]),
                    _floats(r["host_us"]) if r.get("host_us") else None,
                    r.get("label"),
                    [
                        KernelSamples(str(k["name"]), _floats(k["gpu_us"]), k.get("label"))
                        for k in r.get("kernels") or ()
                    ],
                )
            )
        b = Baseline(check_name(str(obj["name"])), str(obj["run"]), str(obj["created_at"]), dict(obj["facts"]), ranges)
    except (KeyError, TypeError, ValueError, BadArgument) as e:
        raise BadInput(path, f"a profkit baseline file with a missing or bad field ({type(e).__name__}: {e})") from None
    if not b.ranges:
        raise BadInput(path, "a profkit baseline file with no ranges")
    return b


def import_file(store: Store, path: str | Path, name: str | None = None, replace: bool = False) -> Baseline:
    b = read(path)
    if name:
        b.name = check_name(name)
    try:
        save(store, b, replace)
    except sqlite3.IntegrityError as e:
        raise BadInput(path, f"a range or kernel listed twice ({e})") from None
    return b


def now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def _floats(xs) -> list[float]:
    out = [float(x) for x in xs]
    if not out or any(not (x >= 0) for x in out):  # (NaN fails too)
        raise ValueError("per-call times must be a non-empty list of numbers >= 0")
    return out


def _round(xs):
    return None if xs is None else [round(x, _DIGITS) for x in xs]


def _dump(xs) -> str | None:
    return None if xs is None else json.dumps(_round(xs))
