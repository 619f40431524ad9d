"""Source-line hotspots of a kernel from Nsight Compute's Source Counters (the `sass` and
`source_lines` views): its lines ranked by sampled warp stalls, each with its stall breakdown,
executed instructions and a one-line reading.

ncu samples each warp's state at a fixed interval and charges the sample to the instruction the
warp is at: a warp waiting on a load's result is charged at the instruction that *uses* it
(the consumer), with the reason `long_scoreboard`. So the reading names the stalled instruction
and, for memory waits, the load on that line where there is one. Without line info (a CUDA
binary built without -lineinfo) the instructions themselves are ranked.
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass, field

from profkit.core.errors import BadArgument
from profkit.store.store import Store

# what each sampled warp state means (ncu's stall reasons: smsp__pcsamp_warps_issue_stalled_*)
MEANING = {
    "long_scoreboard": "waiting on a global or local memory load (L1TEX: L2 or DRAM)",
    "short_scoreboard": "waiting on shared memory or a special-function (MUFU) result",
    "wait": "a fixed-latency dependency between instructions",
    "barrier": "waiting at a barrier (__syncthreads, tl.reduce) for the block's other warps",
    "membar": "waiting at a memory fence",
    "math_pipe_throttle": "the math pipe it needs is busy: compute-bound on that pipe",
    "mio_throttle": "the MIO queue is full (shared memory, special math, shuffles)",
    "lg_throttle": "the local/global memory queue is full: too many memory instructions in flight",
    "tex_throttle": "the texture/L1TEX pipe is full",
    "dispatch_stall": "the dispatcher stalled (a pipeline conflict)",
    "branch_resolving": "waiting for a branch to resolve",
    "drain": "draining memory writes before the warp exits",
    "imc_miss": "an immediate-constant cache miss",
    "no_instructions": "no instruction fetched (instruction cache miss, or after a branch)",
    "sleeping": "the warp sleeps (nanosleep, yield)",
    "not_selected": "eligible, but another warp issued: enough parallelism here",
    "selected": "issuing: no stall",
    "misc": "a miscellaneous stall",
}
GLOBAL_LOAD = re.compile(r"^(?:@!?U?P\w+\s+)?(LDG|LDL|LD|LDGSTS|UTMALDG|UBLKCP)\b")
SHARED_LOAD = re.compile(r"^(?:@!?U?P\w+\s+)?(LDS|LDSM)\b")


@dataclass
class Line:
    file: str | None
    line: int | None
    samples: int
    samples_not_issued: int | None
    inst_executed: int | None
    stalls: dict[str, int]  # reason -> samples, most first
    text: str | None  # the source line, where the report embeds it
    instructions: list[dict]  # the line's instructions: pc, instruction, samples, top reason
    share: float = 0.0  # of the kernel's samples
    reading: str = ""

    @property
    def where(self) -> str:
        if self.line is None:
            return f"PC {self.instructions[0]['pc']:#x}" if self.instructions else "(no line info)"
        return f"{short_file(self.file)}:{self.line}"


@dataclass
class Hotspots:
    run: str
    kernel: str  # the kernel's name
    launches: list[int]  # kernel_ids summed
    samples: int
    inst_executed: int | None
    stalls: dict[str, int]
    by: str  # "line" or "instruction" (no line info)
    lines: list[Line]
    files: dict[str, list[str]] = field(default_factory=dict)  # embedded source: file -> lines
    others: list[dict] = field(default_factory=list)  # the run's other kernels with counters
    notes: list[str] = field(default_factory=list)
    all_lines: list[Line] = field(default_factory=list)  # every line, not only the top (the HTML page)

    def as_dict(self, with_files: bool = False) -> dict:
        d = asdict(self)
        d.pop("all_lines")
        if not with_files:
            d.pop("files")
        for ln, src in zip(d["lines"], self.lines):
            ln["where"] = src.where
        return d

    @property
    def top(self) -> Line | None:
        return self.lines[0] if self.lines else None


def short_file(path: str | None) -> str:
    return "?" if not path else path.rsplit("/", 1)[-1]


def _sum(dicts) -> dict[str, int]:
    out: dict[str, int] = {}
    for d in dicts:
        for k, v in d.items():
            out[k] = out.get(k, 0) + v
    return dict(sorted(out.items(), key=lambda x: -x[1]))


def _total(rows: list[dict], key: str) -> int | None:
    """The rows' sum of `key` (None when no row has it)."""
    got = [r[key] for r in rows if r[key] is not None]
    return sum(got) if got else None


def _stall_of(stalls: dict[str, int]) -> str | None:
    """The dominant stall: the reason with most samples, not counting `selected` (issuing)."""
    real = {k: v for k, v in stalls.items() if k != "selected" and v}
    return max(real, key=real.__getitem__) if real else None


def kernels(store: Store, run: str) -> list[dict]:
    """The run's kernels with Source Counters: name, launches, samples, most first."""
    return store.query(
        """
        SELECT kernel_name, count(DISTINCT kernel_id) AS launches, sum(samples) AS samples,
               sum(inst_executed) AS inst_executed
        FROM sass WHERE run = ? GROUP BY kernel_name ORDER BY sum(samples) DESC, kernel_name""",
        (run,),
    )


def _pick(store: Store, run: str, kernel: str | None) -> tuple[str, list[int], list[dict]]:
    have = kernels(store, run)
    if not have:
        raise BadArgument(
            f"run {run!r} has no Source Counters: capture its kernels with ncu --section SourceCounters "
            f"--import-source yes"
        )
    if kernel is not None and kernel.isdigit():
        rows = store.query("SELECT DISTINCT kernel_name FROM sass WHERE run = ? AND kernel_id = ?", (run, int(kernel)))
        if not rows:
            raise BadArgument(f"run {run!r}: launch {kernel} has no Source Counters")
        return rows[0]["kernel_name"], [int(kernel)], have
    pool = have if kernel is None else [k for k in have if kernel.lower() in k["kernel_name"].lower()]
    if not pool:
        raise BadArgument(
            f"run {run!r}: no kernel with Source Counters matches {kernel!r}; those that have them: "
            + ", ".join(k["kernel_name"][:60] for k in have[:8])
        )
    exact = [k for k in pool if kernel is not None and k["kernel_name"] == kernel]
    name = (exact or pool)[0]["kernel_name"]
    ids = [
        r["kernel_id"]
        for r in store.query(
            "SELECT DISTINCT kernel_id FROM sass WHERE run = ? AND kernel_name = ? ORDER BY kernel_id", (run, name)
        )
    ]
    return name, ids, have


_PRED = re.compile(r"^@!?U?P\w+\s+")
_REG = re.compile(r"\bR(\d+)\b")
_WIDTH = {".64": 2, ".128": 4}
# a stall's producer: the instruction whose result the stalled one waits for
PRODUCERS = {"long_scoreboard": (GLOBAL_LOAD, "global load"), "short_scoreboard": (SHARED_LOAD, "shared-memory load")}
LOOKBACK = 256  # instructions searched back for the producer


def _operands(instruction: str) -> tuple[str, list[str]]:
    body = _PRED.sub("", instruction.strip())
    op, _, rest = body.partition(" ")
    return op, [o.strip() for o in rest.split(",")] if rest else []


def _written(instruction: str) -> set[int]:
    """Registers a load writes: its first operand, widened by the access size (.64, .128)."""
    op, ops = _operands(instruction)
    m = re.fullmatch(r"R(\d+)", ops[0]) if ops else None
    if not m:
        return set()
    n = next((w for suffix, w in _WIDTH.items() if suffix in op), 1)
    return set(range(int(m.group(1)), int(m.group(1)) + n))


def _read(instruction: str) -> set[int]:
    """Registers an instruction reads (every register operand but a destination's)."""
    op, ops = _operands(instruction)
    stores = op.startswith(("ST", "RED", "ATOM", "BRA", "EXIT", "BAR", "ISETP", "FSETP", "HSETP"))
    return {int(r) for o in (ops if stores else ops[1:]) for r in _REG.findall(o)}


def producer(program: list[dict], pc: int, reason: str) -> dict | None:
    """The load the instruction at `pc` waits on for a scoreboard stall: the nearest earlier
    load of the reason's kind writing a register it reads (None: not found, or no such reason)."""
    kind = PRODUCERS.get(reason)
    at = next((i for i, x in enumerate(program) if x["pc"] == pc), None)
    if kind is None or at is None or not program[at]["instruction"]:
        return None
    wanted = _read(program[at]["instruction"])
    for x in reversed(program[max(0, at - LOOKBACK) : at]):
        ins = x["instruction"] or ""
        if kind[0].match(ins) and _written(ins) & wanted:
            return x
    return None


def reading(ln: Line, program: list[dict] | None = None) -> str:
    """One line saying what the line's warps wait on (`program`: the kernel's instructions in
    PC order, to name the load a scoreboard stall waits for)."""
    reason = _stall_of(ln.stalls)
    if reason is None:
        return f"{ln.where}: issuing, no stall sampled"
    share = ln.stalls[reason] / ln.samples if ln.samples else 0.0
    top = max(ln.instructions, key=lambda i: i["stalls"].get(reason, 0))
    op = _operands(top["instruction"] or "?")[0]
    what = reason.replace("_", " ")
    meaning = MEANING.get(reason, "a stall ncu names " + reason)
    # file:line, not "line N": a kernel's lines are in several files (Triton's tl.max and a CUDA
    # header's conversions are inlined with the lines of the file they were written in)
    at = ln.where if ln.line is not None else f"PC {top['pc']:#x}"
    src = producer(program or [], top["pc"], reason)
    if src is not None:
        kind = PRODUCERS[reason][1]
        meaning = "waiting on DRAM or L2" if reason == "long_scoreboard" else "waiting on shared memory"
        there = f"{short_file(src.get('file'))}:{src['line']}" if src.get("line") is not None else f"PC {src['pc']:#x}"
        if ln.line is not None and src.get("line") == ln.line and src.get("file") == ln.file:
            head = f"{what} on the {kind} at {at}"
        else:
            head = f"{what} at {at} ({op} waits for the {kind} at {there})"
    elif ln.line is None:
        head = f"{what} at {op} ({at})"
    else:
        head = f"{what} at {at} ({op})"
    return f"{head}: {meaning} ({100 * share:.0f} % of its {ln.samples:,} samples)"


def report(store: Store, run: str | None = None, kernel: str | None = None, top: int = 10) -> Hotspots:
    """The hotspots of one kernel of a run (`kernel`: a substring of its name, or a launch id;
    default the kernel with most samples), its launches summed."""
    run = store.require_run(run)
    if top < 1:
        raise BadArgument(f"--top {top}: at least 1")
    name, ids, have = _pick(store, run, kernel)
    marks = ",".join("?" * len(ids))
    rows = store.query(
        f"""
        SELECT s.kernel_id, s.pc, s.instruction, s.file, s.line, s.inst_executed, s.samples, s.samples_not_issued,
               s.stalls, l.file_id
        FROM sass s JOIN launch l ON l.id = s.kernel_id OR l.timeline_id = s.kernel_id
        WHERE s.run = ? AND s.kernel_id IN ({marks}) AND l.source = 'ncu'
        ORDER BY s.pc""",
        (run, *ids),
    )
    by_line = any(r["line"] is not None for r in rows)
    groups: dict[tuple, list[dict]] = {}
    for r in rows:
        key = (r["file"], r["line"]) if by_line else (None, r["pc"])
        groups.setdefault(key, []).append(r)
    file_ids = sorted({r["file_id"] for r in rows})
    files: dict[str, list[str]] = {}
    if file_ids:
        marks = ",".join("?" * len(file_ids))
        for t in store.query(
            f"SELECT file, line, text FROM source_text WHERE file_id IN ({marks}) ORDER BY file, line", file_ids
        ):
            lines = files.setdefault(t["file"], [])
            if len(lines) < t["line"]:  # (the same file embedded by several reports: once)
                lines.extend([""] * (t["line"] - len(lines)))
                lines[t["line"] - 1] = t["text"]
    out: list[Line] = []
    for (file, where), rs in groups.items():
        per_pc: dict[int, dict] = {}
        for r in rs:
            i = per_pc.setdefault(
                r["pc"],
                {"pc": r["pc"], "instruction": r["instruction"], "samples": 0, "inst_executed": 0, "stalls": {}},
            )
            i["samples"] += r["samples"] or 0
            i["inst_executed"] += r["inst_executed"] or 0
            i["stalls"] = _sum([i["stalls"], json.loads(r["stalls"] or "{}")])
        instrs = sorted(per_pc.values(), key=lambda i: i["pc"])
        text = None
        if by_line and file in files and where is not None and 0 < where <= len(files[file]):
            text = files[file][where - 1]
        ln = Line(
            file,
            where if by_line else None,
            sum(r["samples"] or 0 for r in rs),
            _total(rs, "samples_not_issued"),
            _total(rs, "inst_executed"),
            _sum(json.loads(r["stalls"] or "{}") for r in rs),
            text,
            instrs,
        )
        out.append(ln)
    total = sum(ln.samples for ln in out)
    program = list({r["pc"]: r for r in rows}.values())  # (rows come in PC order)
    for ln in out:
        ln.share = ln.samples / total if total else 0.0
        ln.reading = reading(ln, program)
    out.sort(key=lambda ln: (-ln.samples, ln.file or "", ln.line or 0, ln.instructions[0]["pc"]))
    executed = [r["inst_executed"] for r in rows if r["inst_executed"] is not None]
    h = Hotspots(
        run,
        name,
        ids,
        total,
        sum(executed) if executed else None,
        _sum(ln.stalls for ln in out),
        "line" if by_line else "instruction",
        out[:top],
        files,
        [k for k in have if k["kernel_name"] != name],
        all_lines=out,
    )
    if not by_line:
        h.notes.append(
            "no source line info in this kernel's binary (build CUDA C++ with -lineinfo): its "
            "instructions are ranked instead"
        )
    elif not files:
        h.notes.append("the report embeds no source (ncu --import-source yes): lines without their text")
    if not total:
        h.notes.append("no warp-state samples for this kernel (the SourceCounters section samples them)")
    if len(ids) > 1:
        h.notes.append(f"{len(ids)} launches of this kernel summed")
    return h


def evidence(store: Store, run: str) -> dict[int, dict]:
    """{kernel_id: {line, stall, share, samples, reading}}: each launch's top line and its
    dominant stall, for the label's evidence (launches with Source Counters only)."""
    try:
        rows = store.query(
            "SELECT kernel_id, file, line, samples, stalls FROM source_lines WHERE run = ? AND samples > 0", (run,)
        )
    except Exception:  # noqa: BLE001 - a read-only database from before the sass views
        return {}
    best: dict[int, dict] = {}
    total: dict[int, int] = {}
    for r in rows:
        total[r["kernel_id"]] = total.get(r["kernel_id"], 0) + r["samples"]
        if r["kernel_id"] not in best or r["samples"] > best[r["kernel_id"]]["samples"]:
            best[r["kernel_id"]] = r
    out = {}
    for k, r in best.items():
        stalls = json.loads(r["stalls"] or "{}")
        reason = _stall_of(stalls)
        where = f"{short_file(r['file'])}:{r['line']}" if r["line"] is not None else None
        out[k] = {
            "line": where,
            "stall": reason,
            "line_share": r["samples"] / total[k] if total[k] else None,
            "stall_share": stalls.get(reason, 0) / r["samples"] if reason and r["samples"] else None,
            "samples": r["samples"],
        }
    return out
