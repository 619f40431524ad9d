import json
import pickle
import shutil
import sqlite3

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from profdata import DATA

from profkit.core.nvtx import I64_MAX, names_json, names_of, project, project_columns, range_paths


def test_nested_push_pop_and_start_end():
    ranges = [
        (None, "outer", "push_pop", 0, 100, 1, 1),
        (None, "inner", "push_pop", 10, 20, 1, 1),
        (None, "later", "push_pop", 30, 40, 1, 1),
        ("d", "window", "start_end", 25, 60, 1, 1),
        (None, "other_thread", "push_pop", 0, 100, 1, 2),
    ]
    calls = [(0, 1, 1, 15), (1, 1, 1, 22), (2, 1, 1, 35), (3, 1, 1, 200), (4, 1, 2, 50), (5, 1, 1, 20)]
    p = project(ranges, calls)
    assert p[0] == ("inner", "outer/inner")
    assert p[1] == ("outer", "outer")          # inner closed at 20
    assert p[2] == ("later", "outer/window/later")
    assert p[3] == (None, None)
    assert p[4] == ("window", "other_thread/window")  # start/end ranges are process-wide
    assert p[5] == ("inner", "outer/inner")     # a call at the closing instant is still inside
    assert range_paths(ranges) == [(0, "outer"), (1, "outer/inner"), (1, "outer/later"), (0, "window"),
                                   (0, "other_thread")]


def test_unterminated_range_encloses_to_the_end():
    p = project([(None, "open", "push_pop", 5, None, 1, 1)], [(0, 1, 1, 10**12)])
    assert p[0] == ("open", "open")


def test_a_name_holding_a_slash_stays_one_name():
    """TensorRT layer names hold '/': the path keeps them whole (issue 15 item 6)."""
    ranges = [(None, "engine", "push_pop", 0, 100, 1, 1), (None, "/conv1/Conv + /relu/Relu", "push_pop", 10, 20, 1, 1)]
    inner, path = project(ranges, [(0, 1, 1, 15)])[0]
    assert inner == "/conv1/Conv + /relu/Relu" and path == "engine//conv1/Conv + /relu/Relu"
    assert names_of(path) == ("engine", "/conv1/Conv + /relu/Relu")
    assert json.loads(names_json(names_of(path))) == ["engine", "/conv1/Conv + /relu/Relu"]
    assert range_paths(ranges)[1][1].names == ("engine", "/conv1/Conv + /relu/Relu")
    assert pickle.loads(pickle.dumps(path)).names == path.names  # crosses the ncu reader's process
    assert names_of("a/b") == ("a", "b")  # a plain string from an older parser: split at '/'


def _columns(ranges, calls):
    """project_columns over the same ranges and calls, answered as project/range_paths would."""
    names = sorted({r[1] for r in ranges}, key=lambda x: (x is None, x or ""))
    code = {n: i for i, n in enumerate(names)}
    th = {}
    tkey = [th.setdefault((r[5], r[6]), len(th)) for r in ranges]
    p = project_columns(
        names, np.array(tkey), np.array([r[5] for r in ranges]), np.array([r[3] for r in ranges]),
        np.array([I64_MAX if r[4] is None else r[4] for r in ranges]), np.array([code[r[1]] for r in ranges]),
        np.array([r[2] == "push_pop" for r in ranges]),
        np.array([th.get((c[1], c[2]), -1) for c in calls]), np.array([c[1] for c in calls]), np.array([c[3] for c in calls]))
    got_calls = {c[0]: (None, None) if p.call_path[i] < 0 else (p.paths[p.call_path[i]][-1], "/".join(p.paths[p.call_path[i]]))
                 for i, c in enumerate(calls)}
    got_ranges = [(int(d), "/".join(p.paths[k])) for d, k in zip(p.range_depth, p.range_path)]
    return got_calls, got_ranges


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 3), st.integers(0, 40), st.integers(0, 15), st.booleans(), st.integers(0, 2),
                          st.booleans(), st.integers(0, 1)), max_size=40),
       st.lists(st.tuples(st.integers(0, 2), st.integers(0, 60), st.integers(0, 1)), max_size=30),
       st.booleans())
def test_columns_agree_with_the_sweep(spec, call_spec, nested):
    """Random ranges (nested or crossing, zero-length, unclosed, start/end) and calls: the
    numpy projection gives what the sweep gives, range by range and call by call."""
    ranges = []
    for name, start, length, unclosed, tid, start_end, pid in spec:
        end = None if unclosed and not nested else start + length
        ranges.append((None, f"r{name}", "start_end" if start_end else "push_pop", start, end, pid, tid))
    if nested:  # a proper nesting per thread: what push/pop ranges are in real reports
        ranges = [r for r in _nested(ranges)]
    calls = [(i, pid, tid, t) for i, (tid, t, pid) in enumerate(call_spec)]
    want_calls = project(ranges, calls)
    want_ranges = range_paths(ranges)
    got_calls, got_ranges = _columns(ranges, calls)
    assert got_calls == {k: (v[0], None if v[1] is None else str(v[1])) for k, v in want_calls.items()}
    assert got_ranges == [(d, str(p)) for d, p in want_ranges]


def _nested(ranges):
    """Drop ranges that would cross an earlier kept one on the same thread."""
    kept = []
    for r in ranges:
        if r[2] == "start_end" or all(k[2] == "start_end" or not (k[5], k[6]) == (r[5], r[6]) or r[4] <= k[3] or r[3] >= k[4]
               or (k[3] <= r[3] and r[4] <= k[4]) or (r[3] <= k[3] and k[4] <= r[4]) for k in kept):
            kept.append(r)
    return kept


@pytest.mark.parametrize("columns", [False, True], ids=["row path", "column path"])
def test_a_kernel_launched_after_an_overlapping_range_closed(tmp_path, monkeypatch, columns):
    """Two NVTX domains on one thread, each its own push/pop stack: range B opens inside A and
    outlives it. A kernel launched after A closed is in B, not in A/B (a real export, mutated:
    A = `llama8b-t4096` closes early, B = `other-domain` overlaps its end)."""
    from profkit.parsers import nsys_sqlite

    from profkit.store.ingest import ingest

    f = tmp_path / "overlap.nsys.sqlite"
    shutil.copy(DATA / "rmsnorm-cupti" / "rmsnorm-nsys.nsys.sqlite", f)
    con = sqlite3.connect(f)
    con.execute("UPDATE NVTX_EVENTS SET end = 3988600000 WHERE start = 3988387146")
    con.execute("INSERT INTO NVTX_EVENTS (start, end, eventType, text, globalTid, domainId)"
                " VALUES (3988550000, 3988722000, 59, 'other-domain', 281485277921894, 1)")
    con.commit()
    con.close()
    if columns:
        monkeypatch.setattr(nsys_sqlite, "BULK_MIN_ROWS", 0)
    db = str(tmp_path / "o.db")
    ingest(db, [f], run="o")
    paths = dict(sqlite3.connect(db).execute(
        "SELECT api_start_ns, nvtx_path FROM kernels WHERE api_start_ns IN (3988588935, 3988602309)"))
    assert paths == {3988588935: "rmsnorm/eager/llama8b-t4096/other-domain",
                     3988602309: "rmsnorm/eager/other-domain"}


def test_overlapping_push_pop_ranges_on_one_thread():
    ranges = [(None, "A", "push_pop", 0, 10, 1, 1), ("d", "B", "push_pop", 5, 20, 1, 1),
              (None, "C", "push_pop", 12, 14, 1, 1)]
    p = project(ranges, [(0, 1, 1, 7), (1, 1, 1, 15), (2, 1, 1, 13)])
    assert p == {0: ("B", "A/B"), 1: ("B", "B"), 2: ("C", "B/C")}
