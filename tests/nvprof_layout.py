"""An nvprof report (.nvvp) in NVIDIA's documented layout, built from a real CUPTI trace's
records: CUPTI activity tables, names in StringTable, a marker's thread in its objectId. Used
by tests/test_parsers_nvprof.py and as the fuzzer's nvprof seed."""
import json
import sqlite3
import struct
from pathlib import Path

from profdata import DATA

TRACE = DATA / "rmsnorm-cupti" / "rmsnorm-cupti.cupti.jsonl"


def build_nvvp(path: Path, trace: Path = TRACE, edit=None) -> Path:
    recs = [json.loads(line) for line in trace.read_text().splitlines() if line.strip()]
    con = sqlite3.connect(path)
    con.executescript("""
        CREATE TABLE StringTable (_id_ INTEGER PRIMARY KEY, value TEXT NOT NULL);
        CREATE TABLE CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL (_id_ INTEGER PRIMARY KEY, cacheConfig INT,
            sharedMemoryConfig INT, registersPerThread INT, start INT, "end" INT, deviceId INT, contextId INT,
            streamId INT, gridX INT, gridY INT, gridZ INT, blockX INT, blockY INT, blockZ INT,
            staticSharedMemory INT, dynamicSharedMemory INT, correlationId INT, gridId INT, name INT);
        CREATE TABLE CUPTI_ACTIVITY_KIND_RUNTIME (_id_ INTEGER PRIMARY KEY, cbid INT, start INT, "end" INT,
            processId INT, threadId INT, correlationId INT, returnValue INT);
        CREATE TABLE CUPTI_ACTIVITY_KIND_DRIVER (_id_ INTEGER PRIMARY KEY, cbid INT, start INT, "end" INT,
            processId INT, threadId INT, correlationId INT, returnValue INT);
        CREATE TABLE CUPTI_ACTIVITY_KIND_MARKER (_id_ INTEGER PRIMARY KEY, flags INT, timestamp INT, id INT,
            objectKind INT, objectId BLOB, name INT, domain INT);
        CREATE TABLE CUPTI_ACTIVITY_KIND_MEMCPY (_id_ INTEGER PRIMARY KEY, copyKind INT, srcKind INT, dstKind INT,
            flags INT, bytes INT, start INT, "end" INT, deviceId INT, contextId INT, streamId INT,
            correlationId INT, runtimeCorrelationId INT);
    """)
    names: dict = {}

    def sid(text):
        if text is None:
            return 0
        if text not in names:
            names[text] = len(names) + 1
            con.execute("INSERT INTO StringTable VALUES (?, ?)", (names[text], text))
        return names[text]

    for r in recs:
        if r["type"] == "kernel":
            g, b = r.get("grid") or [None] * 3, r.get("block") or [None] * 3
            con.execute("INSERT INTO CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL (registersPerThread, start, \"end\","
                        " deviceId, streamId, gridX, gridY, gridZ, blockX, blockY, blockZ, staticSharedMemory,"
                        " dynamicSharedMemory, correlationId, name) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                        (r.get("registers_per_thread"), r["start"], r["end"], r.get("device"), r.get("stream"),
                         *g, *b, r.get("static_shared_memory"), r.get("dynamic_shared_memory"),
                         r.get("correlation_id"), sid(r["name"])))
        elif r["type"] in ("runtime", "driver"):
            con.execute(f"INSERT INTO CUPTI_ACTIVITY_KIND_{r['type'].upper()} (cbid, start, \"end\", processId,"
                        " threadId, correlationId) VALUES (?,?,?,?,?,?)",
                        (r.get("cbid"), r["start"], r["end"], r["pid"], r["tid"], r.get("correlation_id")))
        elif r["type"] == "marker":
            con.execute("INSERT INTO CUPTI_ACTIVITY_KIND_MARKER (flags, timestamp, id, objectKind, objectId, name,"
                        " domain) VALUES (?,?,?,?,?,?,?)",
                        (r["flags"], r["timestamp"], r["id"], 2, struct.pack("<III", r["pid"], r["tid"], 0),
                         sid(r.get("name")), sid(r.get("domain"))))
    con.execute("INSERT INTO CUPTI_ACTIVITY_KIND_MEMCPY (copyKind, bytes, start, \"end\") VALUES (1, 4096, 10, 30)")
    for q in edit or ():
        con.execute(q)
    con.commit()
    con.close()
    return path
