"""The operator table's SQL: writing a report's op rows (OP_FIELDS) with their kernels, and
reading and updating the operator model's columns (profkit/analyses/shape_labels.py fills them)."""

from __future__ import annotations

import sqlite3


def write(
    c: sqlite3.Connection, run: str, file_id: int, rank: int | None, ops: list[tuple], seq_to_id: dict[int, int]
) -> None:
    """Op rows of one report; each kernel seq of an op becomes an op_launch row."""
    if not ops:
        return
    base = c.execute("SELECT coalesce(max(id), 0) FROM op_row").fetchone()[0] + 1
    c.executemany(
        "INSERT INTO op_row (id, run, file_id, rank, op, start_ns, end_ns, pid, tid, input_dims, input_types,"
        " input_strides, concrete, trace_flops, source, torch_op_id, input_op_ids)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            (
                base + i,
                run,
                file_id,
                rank,
                o[0],
                o[1],
                o[2],
                _int(o[3]),
                _int(o[4]),
                o[5],
                o[6],
                o[7],
                o[8],
                o[9],
                o[11],
                _int(o[12]),
                o[13],
            )
            for i, o in enumerate(ops)
        ),
    )
    c.executemany(
        "INSERT OR IGNORE INTO op_launch (launch_id, op_id) VALUES (?, ?)",
        ((seq_to_id[s], base + i) for i, o in enumerate(ops) for s in o[10] if s in seq_to_id),
    )


def _int(v):
    return v if isinstance(v, int) else None


LAUNCH_OPS = (
    "SELECT l.launch_id, o.id AS op_id, o.op, o.input_dims, o.input_types, o.concrete, o.input_strides, o.family,"
    " o.flops,"
    " o.min_bytes, o.precision, o.note, o.torch_op_id, o.input_op_ids, (SELECT count(*) FROM op_launch x WHERE x.op_id = o.id) AS kernels,"
    " (SELECT sum(r.duration_ns) FROM op_launch x JOIN launch_row r ON r.id = x.launch_id"
    "  WHERE x.op_id = o.id) AS gpu_ns"
    " FROM op_launch l JOIN op_row o ON o.id = l.op_id WHERE o.run = ?"
)


def set_model(c: sqlite3.Connection, rows: list[tuple]) -> None:
    """rows: (family, flops, min_bytes, precision, note, op id)."""
    c.executemany("UPDATE op_row SET family = ?, flops = ?, min_bytes = ?, precision = ?, note = ? WHERE id = ?", rows)
