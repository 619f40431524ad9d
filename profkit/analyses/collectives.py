"""NCCL collectives of a run: what each NCCL kernel did, how fast, and how long each rank waited.

Per NCCL kernel (profkit.core.names.is_comm):

- collective, algorithm, protocol, reduction and data type from the kernel name
  (`ncclDevKernel_AllReduce_Sum_bf16_RING_LL`, `ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t`);
- message size: from torch.profiler's trace arguments (`In msg nelems`, `Out msg nelems`,
  `dtype`, `Group size`), on the NCCL kernel events themselves (torch >= 2.2) or else on the
  `record_param_comms` CPU events, matched to the rank's NCCL kernels of the same collective in
  order; else unknown, and the notes say why. NCCL's own NVTX ranges carry the
  size in a binary payload (schema "Message size [bytes]"), but the nsys exports profkit has
  seen keep the schema and not the payload values (NVTX_EVENTS.binaryData empty), and the
  store keeps neither: those sizes are unknown;
- algorithm bandwidth (size / kernel time) and bus bandwidth, algbw times nccl-tests' factor
  for the collective over n ranks (BUS_FACTOR: the traffic each link carries, so it compares
  with the link's peak whatever the collective), against the measured link peak of a peaks file
  (a record whose ceiling is `nvlink` or `link` for the run's GPU) where there is one.

Per rank and collective, the wait: a collective starts on every rank when that rank arrives and
ends when the last one has, so a rank that arrives early waits for the last. With the ranks'
clocks aligned (profkit.analyses.ranks: offsets from the common ends of the collectives), the
k-th collective's wait on a rank is the latest rank's start minus its own. Summed per rank and
step (the step whose GPU window holds the kernel). Without the same collectives on every rank
the clocks cannot be aligned and the waits are left empty.
"""

from __future__ import annotations

import gzip
import json
import re
from collections import Counter, defaultdict
from dataclasses import asdict, dataclass
from pathlib import Path

from profkit.analyses import ranks as rk
from profkit.core.names import is_comm
from profkit.store.store import Store

ALGORITHMS = ("COLLNET_DIRECT", "COLLNET_CHAIN", "NVLS_TREE", "NVLS", "RING", "TREE", "PAT")
PROTOCOLS = ("LL128", "LL", "SIMPLE")
REDUCTIONS = ("Sum", "Prod", "Max", "Min", "PreMulSum", "SumPostDiv", "Avg")

# nccl-tests (doc/PERFORMANCE.md): bus bandwidth = algorithm bandwidth x factor(n ranks)
BUS_FACTOR = {
    "AllReduce": lambda n: 2 * (n - 1) / n,
    "ReduceScatter": lambda n: (n - 1) / n,
    "AllGather": lambda n: (n - 1) / n,
    "AllToAll": lambda n: (n - 1) / n,
    "Broadcast": lambda n: 1.0,
    "Reduce": lambda n: 1.0,
    "SendRecv": lambda n: 1.0,
    "Send": lambda n: 1.0,
    "Recv": lambda n: 1.0,
}

# torch's `Collective name` -> NCCL's kernel collective
_TORCH_COLLECTIVE = {
    "allreduce": "AllReduce",
    "all_reduce": "AllReduce",
    "allreduce_coalesced": "AllReduce",
    "allgather": "AllGather",
    "_allgather_base": "AllGather",
    "all_gather": "AllGather",
    "allgather_into_tensor_coalesced": "AllGather",
    "all_gather_into_tensor": "AllGather",
    "reduce_scatter": "ReduceScatter",
    "_reduce_scatter_base": "ReduceScatter",
    "reduce_scatter_tensor_coalesced": "ReduceScatter",
    "reduce_scatter_tensor": "ReduceScatter",
    "broadcast": "Broadcast",
    "reduce": "Reduce",
    "send": "SendRecv",
    "recv": "SendRecv",
    "all_to_all": "SendRecv",
    "alltoall": "SendRecv",
    "alltoall_base": "SendRecv",
    "all_to_allv": "SendRecv",
}  # NCCL runs all-to-all as grouped send/recv kernels

# torch dtype names (as record_param_comms writes them) and NCCL kernel dtypes -> bytes
DTYPE_BYTES = {
    "Float": 4,
    "Double": 8,
    "Half": 2,
    "BFloat16": 2,
    "Int": 4,
    "Long": 8,
    "Short": 2,
    "Char": 1,
    "Byte": 1,
    "Bool": 1,
    "Float8_e4m3fn": 1,
    "Float8_e5m2": 1,
    "f32": 4,
    "f64": 8,
    "f16": 2,
    "half": 2,
    "bf16": 2,
    "i32": 4,
    "u32": 4,
    "i64": 8,
    "u64": 8,
    "i8": 1,
    "u8": 1,
    "int8_t": 1,
    "uint8_t": 1,
    "int32_t": 4,
    "uint32_t": 4,
    "int64_t": 8,
    "uint64_t": 8,
    "float": 4,
    "double": 8,
    "__nv_bfloat16": 2,
    "f8e4m3": 1,
    "f8e5m2": 1,
}

_KERNEL = re.compile(r"^nccl(?:Dev)?Kernel_([A-Za-z]+)(?:_(.*))?$")


def parse_name(name: str) -> dict:
    """{collective, algorithm, protocol, reduction, dtype} of an NCCL kernel name (None where
    the name does not say)."""
    short = name.split("(")[0].strip()
    m = _KERNEL.match(short)
    out: dict[str, str | None] = {
        "collective": None,
        "algorithm": None,
        "protocol": None,
        "reduction": None,
        "dtype": None,
    }
    if not m:
        return out
    out["collective"] = m.group(1)
    rest = m.group(2) or ""
    for a in ALGORITHMS:  # longest first: NVLS_TREE before NVLS and TREE
        if re.search(rf"(^|_){a}(_|$)", rest):
            out["algorithm"] = a
            rest = re.sub(rf"(^|_){a}(_|$)", "_", rest, count=1)
            break
    toks = [t for t in rest.split("_") if t]
    for t in toks:
        if t in PROTOCOLS and out["protocol"] is None:
            out["protocol"] = t
        elif t in REDUCTIONS and out["reduction"] is None:
            out["reduction"] = t
    left = [t for t in toks if t not in PROTOCOLS and t not in REDUCTIONS]
    if left:  # int8_t and uint64_t keep their own underscore
        d = "_".join(left)
        out["dtype"] = d if d in DTYPE_BYTES else left[0] if left[0] in DTYPE_BYTES else d
    return out


def bus_factor(collective: str | None, n: int | None) -> float | None:
    f = BUS_FACTOR.get(collective or "")
    return None if f is None or not n or n < 1 else f(n)


def torch_sizes(path) -> tuple[list[dict], int | None]:
    """The collectives' arguments in a torch.profiler (Kineto) trace, in time order:
    {collective, bytes, group_size, dtype}; bytes None where the trace lacks the element counts
    (torch before 2.1 wrote only `Input Dims`); and the job's world size (distributedInfo)."""
    path = Path(path)
    opener = gzip.open if path.name.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8", errors="replace") as f:
        doc = json.load(f)
    events = doc.get("traceEvents", []) if isinstance(doc, dict) else []
    info = doc.get("distributedInfo") if isinstance(doc, dict) else None
    world = info.get("world_size") if isinstance(info, dict) else None
    # torch >= 2.2 copies the collective's arguments onto its NCCL kernel event: those, where
    # present, are one per kernel; else the CPU-side record_param_comms, one per call
    kernels = [
        e
        for e in events
        if isinstance(e, dict)
        and e.get("cat") in ("kernel", "Kernel")
        and str(e.get("name", "")).lower().startswith("nccl")
        and isinstance(e.get("args"), dict)
        and "In msg nelems" in e["args"]
    ]
    chosen = kernels or [e for e in events if isinstance(e, dict) and e.get("name") == "record_param_comms"]
    out = []
    for e in sorted(chosen, key=lambda e: e.get("ts", 0)):
        a = e.get("args") or {}
        coll = _TORCH_COLLECTIVE.get(str(a.get("Collective name", "")).lower())
        nel = [a.get("In msg nelems"), a.get("Out msg nelems")]
        width = DTYPE_BYTES.get(str(a.get("dtype")))
        size = None
        if width and any(isinstance(x, (int, float)) for x in nel):
            # nccl-tests' size: the larger buffer (all-gather's output, reduce-scatter's input)
            size = int(max(x for x in nel if isinstance(x, (int, float)))) * width
        out.append(
            {
                "collective": coll,
                "bytes": size,
                "group_size": a.get("Group size"),
                "dtype": a.get("dtype"),
                "from": "kernel args" if kernels else "record_param_comms",
            }
        )
    return out, world if isinstance(world, int) and world > 0 else None


@dataclass
class Collectives:
    run: str
    ranks: list
    kernels: list[dict]  # one per NCCL kernel
    summary: list[dict]  # per collective, algorithm, protocol
    waits: list[dict]  # per rank and step
    link_peak: dict | None
    notes: list[str]

    def as_dict(self) -> dict:
        return asdict(self)


def _link_peak(peaks: list[dict] | None, gpu: str | None) -> dict | None:
    for p in peaks or ():
        if p.get("gpu") == gpu and p.get("ceiling") in ("nvlink", "link"):
            return p
    return None


def analyse(
    store: Store, run: str | None = None, peaks: list[dict] | None = None, step_pattern: str = rk.STEP_PATTERN
) -> Collectives:
    run = store.require_run(run)
    notes: list[str] = []
    rows = store.conn.execute(
        "SELECT rank, short_name, kernel_name, start_ns, end_ns FROM kernels WHERE run = ? AND source != 'ncu'"
        " AND start_ns IS NOT NULL ORDER BY rank, start_ns",
        (run,),
    ).fetchall()
    comm = [r for r in rows if is_comm(r[1]) or is_comm(r[2])]
    ranks = sorted({r[0] for r in rows}, key=lambda r: -1 if r is None else r)
    gpu = (store.conn.execute("SELECT gpu_name FROM runs WHERE run = ?", (run,)).fetchone() or (None,))[0]
    peak = _link_peak(peaks, gpu)

    # message sizes: a Kineto trace's record_param_comms, per rank, matched in order per collective
    sizes: dict = {}
    world = None  # the job's ranks, where a trace says (a sample of its ranks may be loaded)
    kineto = store.conn.execute(
        "SELECT rank, path FROM report_file WHERE run = ? AND format LIKE 'kineto%'", (run,)
    ).fetchall()
    for rank, path in kineto:
        try:
            per: dict = defaultdict(list)
            events, world = torch_sizes(path)
            for s in events:
                per[s["collective"]].append(s)
            sizes[rank] = per
        except (OSError, ValueError) as e:
            notes.append(f"rank {rank}: message sizes not read from {path} ({type(e).__name__})")
    seen: Counter = Counter()
    kernels = []
    for rank, short, name, start, end in comm:
        p = parse_name(short or name)
        k = seen[(rank, p["collective"])]
        seen[(rank, p["collective"])] += 1
        listed = sizes.get(rank, {}).get(p["collective"]) or []
        msg = listed[k] if k < len(listed) else None
        n = (msg or {}).get("group_size") or world or (len(ranks) if ranks != [None] else None)
        size = (msg or {}).get("bytes")
        dur = end - start
        algbw = size / (dur * 1e-9) if size and dur > 0 else None
        f = bus_factor(p["collective"], n)
        busbw = algbw * f if algbw is not None and f is not None else None
        kernels.append(
            {
                "rank": rank,
                **p,
                "start_ns": start,
                "end_ns": end,
                "duration_ns": dur,
                "bytes": size,
                "size_from": (msg or {}).get("from") if size else None,
                "group_size": n,
                "algbw_gbps": algbw and algbw / 1e9,
                "busbw_gbps": busbw and busbw / 1e9,
                "busbw_pct_of_peak": 100 * busbw / peak["value"] if busbw and peak else None,
                "wait_ns": None,
                "step": None,
            }
        )
    if not comm:
        notes.append("no NCCL kernels in this run")
    elif not any(k["bytes"] for k in kernels):
        notes.append(
            "message sizes unknown: "
            + (
                "the torch.profiler traces carry record_param_comms without element counts (torch < 2.1)"
                if kineto
                else "nsys exports keep NCCL's NVTX payload schema but not its values; a torch.profiler trace "
                "(torch >= 2.1) carries them in record_param_comms"
            )
        )
    if comm and peak is None:
        notes.append(f"no measured link peak for {gpu or 'this GPU'} in the peaks file: bus bandwidth not rated")
    _waits(store, run, kernels, ranks, step_pattern, notes)
    return Collectives(run, ranks, kernels, _summary(kernels), _per_rank_step(kernels), peak, notes)


def _waits(store, run, kernels, ranks, step_pattern, notes) -> None:
    """Fill each kernel's wait_ns (arrival skew against the latest rank) and step."""
    if len(ranks) < 2 or not kernels:
        return
    r = rk.analyse(store, run, step_pattern)
    offsets = {p["rank"]: p["clock_offset_ns"] for p in r.per_rank}
    windows = defaultdict(list)
    for x in r.per_rank_step:
        windows[x.rank].append((x.start_ns, x.end_ns, x.step))
    for k in kernels:
        k["step"] = next((s for a, b, s in windows[k["rank"]] if a <= k["start_ns"] <= b), None)
    if any(v is None for v in offsets.values()):
        notes.append("ranks ran different collectives: clocks not aligned, waits left empty")
        return
    seq = defaultdict(list)
    for k in kernels:
        if k["step"] is not None:  # the collectives ranks aligned the clocks on
            seq[k["rank"]].append(k)
    if len({len(v) for v in seq.values()}) != 1:
        notes.append("ranks ran different numbers of collectives: waits left empty")
        return
    for i in range(len(next(iter(seq.values())))):
        same = [seq[rank][i] for rank in seq]
        latest = max(k["start_ns"] - offsets[k["rank"]] for k in same)
        for k in same:
            k["wait_ns"] = latest - (k["start_ns"] - offsets[k["rank"]])


def _summary(kernels) -> list[dict]:
    groups: dict = defaultdict(list)
    for k in kernels:
        groups[(k["collective"], k["algorithm"], k["protocol"], k["dtype"])].append(k)
    out = []
    for (c, a, p, d), ks in sorted(groups.items(), key=lambda kv: -sum(k["duration_ns"] for k in kv[1])):
        sized = [k for k in ks if k["busbw_gbps"] is not None]
        out.append(
            {
                "collective": c,
                "algorithm": a,
                "protocol": p,
                "dtype": d,
                "kernels": len(ks),
                "total_ns": sum(k["duration_ns"] for k in ks),
                "bytes": sum(k["bytes"] for k in sized) if sized else None,
                "busbw_gbps": (
                    sum(k["bytes"] * bus_factor(c, k["group_size"]) for k in sized)
                    / (sum(k["duration_ns"] for k in sized) * 1e-9)
                    / 1e9
                )
                if sized
                else None,
                "wait_ns": sum(k["wait_ns"] for k in ks if k["wait_ns"] is not None)
                if any(k["wait_ns"] is not None for k in ks)
                else None,
            }
        )
    return out


def _per_rank_step(kernels) -> list[dict]:
    groups: dict = defaultdict(list)
    for k in kernels:
        if k["wait_ns"] is not None:
            groups[(k["rank"], k["step"])].append(k)
    return [
        {
            "rank": rank,
            "step": step,
            "collectives": len(ks),
            "wait_ns": sum(k["wait_ns"] for k in ks),
            "longest_wait_ns": max(k["wait_ns"] for k in ks),
            "at": max(ks, key=lambda k: k["wait_ns"])["collective"],
        }
        for (rank, step), ks in sorted(groups.items(), key=lambda kv: (kv[0][1] or "", kv[0][0]))
    ]
