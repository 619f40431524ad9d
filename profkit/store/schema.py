"""The SQLite schema, in one place, as numbered migrations.

Tables are profkit's own; the views `runs`, `kernels`, `counters` (and `classifications`)
are the stable interface for notebooks and SQL users. docs/schema.md documents both and a
test checks that every view column there exists here. migrate() brings a database up to
LATEST, each pending migration in the one transaction that records it.
"""

from __future__ import annotations

import sqlite3
from datetime import datetime, timezone

from profkit.core.errors import ProfkitError
from profkit.core.families import family_of
from profkit.store.transaction import transaction

MIGRATIONS: list[tuple[int, str, str]] = [
    (
        1,
        "runs, files, launches, ranges, counters",
        """
CREATE TABLE run (
    run         TEXT PRIMARY KEY,
    created_at  TEXT NOT NULL,
    gpu_name    TEXT,
    meta        TEXT NOT NULL DEFAULT '{}'      -- JSON: GPU UUID, driver, clocks, tool versions, command...
);
CREATE TABLE source_file (
    id          INTEGER PRIMARY KEY,
    run         TEXT NOT NULL REFERENCES run(run),
    path        TEXT NOT NULL,
    sha256      TEXT NOT NULL UNIQUE,           -- the same bytes are loaded once per database
    format      TEXT NOT NULL,
    loaded_at   TEXT NOT NULL,
    kernels     INTEGER NOT NULL,
    ranges      INTEGER NOT NULL,
    counters    INTEGER NOT NULL,
    facts       TEXT NOT NULL DEFAULT '{}'
);
CREATE TABLE launch (
    id                   INTEGER PRIMARY KEY,
    run                  TEXT NOT NULL REFERENCES run(run),
    file_id              INTEGER NOT NULL REFERENCES source_file(id),
    source               TEXT NOT NULL,         -- nsys | ncu | cupti
    seq                  INTEGER NOT NULL,      -- order within its file
    kernel_name          TEXT NOT NULL,
    short_name           TEXT,
    nvtx_range           TEXT,
    nvtx_path            TEXT,
    start_ns             INTEGER,
    end_ns               INTEGER,
    duration_ns          INTEGER,
    grid_x INTEGER, grid_y INTEGER, grid_z INTEGER,
    block_x INTEGER, block_y INTEGER, block_z INTEGER,
    registers_per_thread INTEGER,
    shared_mem_static    INTEGER,
    shared_mem_dynamic   INTEGER,
    stream               INTEGER,
    device               INTEGER,
    correlation_id       INTEGER,
    api_name             TEXT,                  -- the runtime/driver call that launched it
    api_start_ns         INTEGER,
    api_end_ns           INTEGER,
    pid                  INTEGER,
    tid                  INTEGER,
    timeline_id          INTEGER                -- ncu launches: the timeline launch they profiled
);
CREATE INDEX launch_run ON launch(run, source);
CREATE INDEX launch_file ON launch(file_id);
CREATE TABLE nvtx_range (
    id        INTEGER PRIMARY KEY,
    run       TEXT NOT NULL REFERENCES run(run),
    file_id   INTEGER NOT NULL REFERENCES source_file(id),
    domain    TEXT,
    text      TEXT,
    kind      TEXT NOT NULL,                    -- push_pop | start_end
    start_ns  INTEGER,
    end_ns    INTEGER,
    pid       INTEGER,
    tid       INTEGER,
    depth     INTEGER,
    path      TEXT
);
CREATE INDEX nvtx_range_file ON nvtx_range(file_id);
CREATE TABLE counter (
    launch_id INTEGER NOT NULL REFERENCES launch(id),
    metric    TEXT NOT NULL,
    unit      TEXT NOT NULL,
    value     REAL NOT NULL,
    PRIMARY KEY (launch_id, metric)
) WITHOUT ROWID;
CREATE INDEX counter_metric ON counter(metric);

CREATE VIEW runs AS
SELECT r.run, r.created_at, r.gpu_name,
       (SELECT json_group_array(f.path) FROM source_file f WHERE f.run = r.run) AS source_files,
       r.meta
FROM run r;

-- One row per launch. ncu launches that profiled a timeline launch are shown through it
-- (their counters attach to it); unmatched ncu launches appear with source 'ncu'.
CREATE VIEW kernels AS
SELECT run, id AS kernel_id, kernel_name, short_name, nvtx_range, nvtx_path,
       start_ns, end_ns, duration_ns, grid_x, grid_y, grid_z, block_x, block_y, block_z,
       registers_per_thread, stream, device, source,
       shared_mem_static, shared_mem_dynamic, api_name, api_start_ns, api_end_ns, pid, tid
FROM launch
WHERE timeline_id IS NULL;

CREATE VIEW counters AS
SELECT l.run, COALESCE(l.timeline_id, l.id) AS kernel_id, l.kernel_name, l.nvtx_range,
       c.metric, c.unit, c.value
FROM counter c JOIN launch l ON l.id = c.launch_id;
""",
    ),
    (
        2,
        "classification labels",
        """
CREATE TABLE label (
    kernel_id INTEGER PRIMARY KEY REFERENCES launch(id),
    run       TEXT NOT NULL,
    label     TEXT NOT NULL,
    reason    TEXT NOT NULL,
    evidence  TEXT NOT NULL                     -- JSON: values, thresholds, rule, source
);
CREATE INDEX label_run ON label(run);
CREATE VIEW classifications AS
SELECT k.run, k.kernel_id, k.kernel_name, k.nvtx_range, l.label, l.reason, l.evidence
FROM label l JOIN kernels k ON k.kernel_id = l.kernel_id;
""",
    ),
    # rank is appended last in each view so positional readers of the old views keep working;
    # it is NULL for single-process runs
    (
        3,
        "rank of multi-process runs",
        """
ALTER TABLE source_file ADD COLUMN rank INTEGER;
ALTER TABLE launch ADD COLUMN rank INTEGER;
ALTER TABLE nvtx_range ADD COLUMN rank INTEGER;
DROP VIEW classifications;
DROP VIEW counters;
DROP VIEW kernels;
CREATE VIEW kernels AS
SELECT run, id AS kernel_id, kernel_name, short_name, nvtx_range, nvtx_path,
       start_ns, end_ns, duration_ns, grid_x, grid_y, grid_z, block_x, block_y, block_z,
       registers_per_thread, stream, device, source,
       shared_mem_static, shared_mem_dynamic, api_name, api_start_ns, api_end_ns, pid, tid, rank
FROM launch
WHERE timeline_id IS NULL;
CREATE VIEW counters AS
SELECT l.run, COALESCE(l.timeline_id, l.id) AS kernel_id, l.kernel_name, l.nvtx_range,
       c.metric, c.unit, c.value, l.rank
FROM counter c JOIN launch l ON l.id = c.launch_id;
CREATE VIEW classifications AS
SELECT k.run, k.kernel_id, k.kernel_name, k.nvtx_range, l.label, l.reason, l.evidence, k.rank
FROM label l JOIN kernels k ON k.kernel_id = l.kernel_id;
""",
    ),
]

# Vocabulary (docs/schema.md): a *report* is a file a profiler wrote; its table is report_file.
MIGRATIONS.append(
    (
        4,
        "report_file: one row per loaded report file (was source_file)",
        """
ALTER TABLE source_file RENAME TO report_file;
""",
    )
)

MIGRATIONS.append(
    (
        5,
        "advice: what to fix first (profkit advise)",
        """
CREATE TABLE advice_item (
    run            TEXT NOT NULL REFERENCES run(run),
    scope          TEXT NOT NULL DEFAULT '',     -- the NVTX path advised on ('' = the run)
    rank           INTEGER NOT NULL,             -- 1 = fix first
    kind           TEXT NOT NULL,                -- range | graph
    nvtx_path      TEXT,
    kernel_name    TEXT,
    label          TEXT,
    share          REAL,                         -- of the scope's GPU time
    share_wall     REAL,                         -- of the scope's wall time (timeline runs)
    recoverable_ns REAL NOT NULL,
    action         TEXT NOT NULL,
    how            TEXT NOT NULL,
    evidence       TEXT NOT NULL,                -- JSON: rows behind the figure, floor, calls, ncu's estimate
    PRIMARY KEY (run, scope, rank)
);
CREATE VIEW advice AS
SELECT run, rank, scope, kind, nvtx_path, kernel_name, label, share, share_wall, recoverable_ns, action, how, evidence
FROM advice_item;
""",
    )
)

MIGRATIONS.append(
    (
        6,
        "tuning trials and benchmark rows (profkit tune, profkit bench)",
        """
CREATE TABLE tune_trial (
    id          INTEGER PRIMARY KEY,
    kernel      TEXT NOT NULL,                -- MODULE:KERNEL as tuned
    source_hash TEXT NOT NULL,                -- of the kernel and its launcher: changed code tunes afresh
    shape       TEXT NOT NULL,                -- JSON, keys sorted
    gpu         TEXT NOT NULL,
    config      TEXT NOT NULL,                -- JSON, keys sorted: constexprs, num_warps, num_stages
    ok          INTEGER,                      -- 1 correct, 0 wrong result, NULL did not compile or launch
    ms          REAL,                         -- median time of one call (kernels.timing)
    rel_err     REAL,
    error       TEXT,
    created_at  TEXT NOT NULL,
    UNIQUE (kernel, source_hash, shape, gpu, config)
);
CREATE VIEW tuning AS
SELECT t.kernel, t.shape, t.gpu, t.config, t.ok, t.ms, t.rel_err, t.error, t.source_hash, t.created_at,
       (t.ok = 1 AND t.ms = (SELECT min(b.ms) FROM tune_trial b WHERE b.kernel = t.kernel AND b.source_hash = t.source_hash
                              AND b.shape = t.shape AND b.gpu = t.gpu AND b.ok = 1)
        AND t.source_hash = (SELECT n.source_hash FROM tune_trial n WHERE n.kernel = t.kernel
                             ORDER BY n.created_at DESC, n.id DESC LIMIT 1)) AS chosen
FROM tune_trial t;
CREATE TABLE bench_result (
    id          INTEGER PRIMARY KEY,
    op          TEXT NOT NULL,
    variant     TEXT NOT NULL,
    shape       TEXT NOT NULL,
    dtype       TEXT NOT NULL,
    gpu         TEXT NOT NULL,
    driver      TEXT,
    torch       TEXT,
    triton      TEXT,
    date        TEXT NOT NULL,
    ok          INTEGER NOT NULL,             -- the reference check passed
    rel_err     REAL,
    ms          REAL,                         -- NULL when the check failed (not timed)
    gbps        REAL,                         -- the operator model's bytes / ms
    tflops      REAL,
    pct_of_copy REAL,                         -- of the device-to-device copy bandwidth measured in the same run
    speedups    TEXT NOT NULL DEFAULT '{}',   -- JSON: baseline variant -> its ms / this ms
    note        TEXT
);
CREATE VIEW bench AS
SELECT op, variant, shape, dtype, gpu, driver, torch, triton, date, ok, rel_err, ms, gbps, tflops, pct_of_copy,
       speedups, note
FROM bench_result;
""",
    )
)

MIGRATIONS.append(
    (
        7,
        "rules: Nsight Compute's guided-analysis results per launch",
        """
CREATE TABLE rule_result (
    launch_id             INTEGER NOT NULL REFERENCES launch(id),
    section               TEXT,                 -- ncu section identifier (SpeedOfLight, Occupancy, ...)
    rule                  TEXT NOT NULL,        -- ncu rule identifier (SOLBottleneck, TheoreticalOccupancy, ...)
    severity              TEXT,                 -- INF | OPT | WRN | ERR, as ncu prints them
    message               TEXT NOT NULL,
    speedup_type          TEXT,                 -- local | global (ncu's estimate kinds)
    estimated_speedup_pct REAL
);
CREATE INDEX rule_result_launch ON rule_result(launch_id);
CREATE VIEW rules AS
SELECT l.run, COALESCE(l.timeline_id, l.id) AS kernel_id, r.rule, r.severity, r.message, r.estimated_speedup_pct,
       r.speedup_type, r.section, l.kernel_name, l.nvtx_range, l.rank
FROM rule_result r JOIN launch l ON l.id = r.launch_id;
""",
    )
)

# A sampled capture measures one launch of each kernel and launch configuration; the others
# point at it (sampled_from) and classify labels them from its counters. Appended last.
MIGRATIONS.append(
    (
        8,
        "sampled_from: a launch's measured sibling (sampled ncu captures)",
        """
ALTER TABLE launch ADD COLUMN sampled_from INTEGER;
DROP VIEW classifications;
DROP VIEW kernels;
CREATE VIEW kernels AS
SELECT run, id AS kernel_id, kernel_name, short_name, nvtx_range, nvtx_path,
       start_ns, end_ns, duration_ns, grid_x, grid_y, grid_z, block_x, block_y, block_z,
       registers_per_thread, stream, device, source,
       shared_mem_static, shared_mem_dynamic, api_name, api_start_ns, api_end_ns, pid, tid, rank, sampled_from
FROM launch
WHERE timeline_id IS NULL;
CREATE VIEW classifications AS
SELECT k.run, k.kernel_id, k.kernel_name, k.nvtx_range, l.label, l.reason, l.evidence, k.rank, k.sampled_from
FROM label l JOIN kernels k ON k.kernel_id = l.kernel_id;
""",
    )
)

# Structured NVTX paths (issue 15 item 6): a name may hold '/' (TensorRT layers), so each
# distinct path is stored once with its names as a JSON array; launches and ranges point to
# it. Ranges keep only that id (a range's text, depth and path are its path's): nvtx_range is
# now a view over nvtx_event, with the same columns plus `names`. Paths loaded before this
# migration had only the '/'-joined text: their names are that text split at '/'.
MIGRATIONS.append(
    (
        9,
        "nvtx_path: structured NVTX paths; nvtx_range a view over nvtx_event",
        """
CREATE TABLE nvtx_path (
    id     INTEGER PRIMARY KEY,
    names  TEXT NOT NULL UNIQUE,                -- JSON array of range names, outermost first
    path   TEXT NOT NULL,                       -- the names joined by '/'
    text   TEXT,                                -- the innermost name
    depth  INTEGER NOT NULL                     -- number of names - 1
);
CREATE INDEX nvtx_path_path ON nvtx_path(path);
INSERT INTO nvtx_path (names, path, text, depth)
WITH RECURSIVE p(path) AS (SELECT nvtx_path FROM launch WHERE nvtx_path IS NOT NULL
                           UNION SELECT path FROM nvtx_range WHERE path IS NOT NULL),
     s(path, rest, names) AS (SELECT path, path || '/', json_array() FROM p
                              UNION ALL SELECT path, substr(rest, instr(rest, '/') + 1),
                                               json_insert(names, '$[#]', substr(rest, 1, instr(rest, '/') - 1))
                              FROM s WHERE rest != '')
SELECT names, path, json_extract(names, '$[#-1]'), json_array_length(names) - 1 FROM s WHERE rest = '';
ALTER TABLE launch ADD COLUMN path_id INTEGER REFERENCES nvtx_path(id);
UPDATE launch SET path_id = (SELECT id FROM nvtx_path p WHERE p.path = launch.nvtx_path) WHERE nvtx_path IS NOT NULL;
CREATE TABLE nvtx_event (
    id        INTEGER PRIMARY KEY,
    run       TEXT NOT NULL REFERENCES run(run),
    file_id   INTEGER NOT NULL REFERENCES report_file(id),
    rank      INTEGER,
    domain    TEXT,
    kind      TEXT NOT NULL,                    -- push_pop | start_end
    start_ns  INTEGER,
    end_ns    INTEGER,
    pid       INTEGER,
    tid       INTEGER,
    path_id   INTEGER REFERENCES nvtx_path(id)  -- its text, depth, path: those of its path
);
INSERT INTO nvtx_event (id, run, file_id, rank, domain, kind, start_ns, end_ns, pid, tid, path_id)
SELECT id, run, file_id, rank, domain, kind, start_ns, end_ns, pid, tid,
       (SELECT id FROM nvtx_path p WHERE p.path = r.path)
FROM nvtx_range r;
DROP TABLE nvtx_range;
CREATE INDEX nvtx_event_file ON nvtx_event(file_id);
CREATE VIEW nvtx_range AS
SELECT e.id, e.run, e.file_id, e.domain, p.text, e.kind, e.start_ns, e.end_ns, e.pid, e.tid, p.depth, p.path,
       e.rank, p.names
FROM nvtx_event e LEFT JOIN nvtx_path p ON p.id = e.path_id;
DROP VIEW classifications;
DROP VIEW kernels;
CREATE VIEW kernels AS
SELECT l.run, l.id AS kernel_id, l.kernel_name, l.short_name, l.nvtx_range, l.nvtx_path,
       l.start_ns, l.end_ns, l.duration_ns, l.grid_x, l.grid_y, l.grid_z, l.block_x, l.block_y, l.block_z,
       l.registers_per_thread, l.stream, l.device, l.source,
       l.shared_mem_static, l.shared_mem_dynamic, l.api_name, l.api_start_ns, l.api_end_ns, l.pid, l.tid, l.rank,
       l.sampled_from, p.names AS nvtx_names
FROM launch l LEFT JOIN nvtx_path p ON p.id = l.path_id
WHERE l.timeline_id IS NULL;
CREATE VIEW classifications AS
SELECT k.run, k.kernel_id, k.kernel_name, k.nvtx_range, l.label, l.reason, l.evidence, k.rank, k.sampled_from
FROM label l JOIN kernels k ON k.kernel_id = l.kernel_id;
""",
    )
)

# Compact launch rows (issue 19): a launch row's text was most of its bytes (1 M launches of
# ~24 distinct kernels: kernel_name ~200 B a row, nvtx_path and nvtx_range copies of its
# nvtx_path row), and bytes are write time. Names are stored once in launch_name and the row
# keeps ids; nvtx_range and nvtx_path are its path's text and path. `launch` is a view with
# the table's old columns in their old order, over launch_row; the views that read it are
# recreated as they were. A launch whose own nvtx_range/nvtx_path are not its path's text and
# path (loaded before migration 9 with a '/' in a range name, whose names were then split at
# '/'; a writer handing text that is not its path's) keeps them in launch_nvtx, which the
# view reads first. The table is rebuilt the 12-step way (migrate() runs it with foreign keys
# off and checks them after): counter, label and rule_result reference launch_row(id), the
# same ids.
MIGRATIONS.append(
    (
        10,
        "launch_row: compact launch rows (names by id); launch a view with the old columns",
        """
DROP VIEW classifications;
DROP VIEW kernels;
DROP VIEW counters;
DROP VIEW rules;
CREATE TABLE launch_name (
    id    INTEGER PRIMARY KEY,
    name  TEXT NOT NULL UNIQUE                  -- a kernel's full or short name, or a launch call's API name
);
INSERT INTO launch_name (name)
SELECT kernel_name FROM launch WHERE kernel_name IS NOT NULL
UNION SELECT short_name FROM launch WHERE short_name IS NOT NULL
UNION SELECT api_name FROM launch WHERE api_name IS NOT NULL;
ALTER TABLE launch RENAME TO launch_row;
CREATE TABLE launch_compact (
    id                   INTEGER PRIMARY KEY,
    run                  TEXT NOT NULL REFERENCES run(run),
    file_id              INTEGER NOT NULL REFERENCES report_file(id),
    source               TEXT NOT NULL,         -- nsys | ncu | cupti | kineto
    seq                  INTEGER NOT NULL,      -- order within its file
    name_id              INTEGER NOT NULL REFERENCES launch_name(id),  -- kernel_name
    short_id             INTEGER REFERENCES launch_name(id),           -- short_name
    start_ns             INTEGER,
    end_ns               INTEGER,
    duration_ns          INTEGER,
    grid_x INTEGER, grid_y INTEGER, grid_z INTEGER,
    block_x INTEGER, block_y INTEGER, block_z INTEGER,
    registers_per_thread INTEGER,
    shared_mem_static    INTEGER,
    shared_mem_dynamic   INTEGER,
    stream               INTEGER,
    device               INTEGER,
    correlation_id       INTEGER,
    api_id               INTEGER REFERENCES launch_name(id),           -- api_name
    api_start_ns         INTEGER,
    api_end_ns           INTEGER,
    pid                  INTEGER,
    tid                  INTEGER,
    timeline_id          INTEGER,               -- ncu launches: the timeline launch they profiled
    rank                 INTEGER,
    sampled_from         INTEGER,
    path_id              INTEGER REFERENCES nvtx_path(id)
);
INSERT INTO launch_compact
SELECT l.id, l.run, l.file_id, l.source, l.seq,
       (SELECT n.id FROM launch_name n WHERE n.name = l.kernel_name),
       (SELECT n.id FROM launch_name n WHERE n.name = l.short_name),
       l.start_ns, l.end_ns, l.duration_ns, l.grid_x, l.grid_y, l.grid_z, l.block_x, l.block_y, l.block_z,
       l.registers_per_thread, l.shared_mem_static, l.shared_mem_dynamic, l.stream, l.device, l.correlation_id,
       (SELECT n.id FROM launch_name n WHERE n.name = l.api_name),
       l.api_start_ns, l.api_end_ns, l.pid, l.tid, l.timeline_id, l.rank, l.sampled_from, l.path_id
FROM launch_row l
ORDER BY l.id;
CREATE TABLE launch_nvtx (
    launch_id   INTEGER PRIMARY KEY REFERENCES launch_compact(id),
    nvtx_range  TEXT,
    nvtx_path   TEXT
);
INSERT INTO launch_nvtx
SELECT l.id, l.nvtx_range, l.nvtx_path FROM launch_row l LEFT JOIN nvtx_path p ON p.id = l.path_id
WHERE l.nvtx_range IS NOT p.text OR l.nvtx_path IS NOT p.path;
DROP TABLE launch_row;
ALTER TABLE launch_compact RENAME TO launch_row;
CREATE INDEX launch_run ON launch_row(run, source);
CREATE INDEX launch_file ON launch_row(file_id);
CREATE VIEW launch AS
SELECT l.id, l.run, l.file_id, l.source, l.seq,
       (SELECT n.name FROM launch_name n WHERE n.id = l.name_id) AS kernel_name,
       (SELECT n.name FROM launch_name n WHERE n.id = l.short_id) AS short_name,
       (SELECT o.nvtx_range FROM launch_nvtx o WHERE o.launch_id = l.id
        UNION ALL SELECT p.text FROM nvtx_path p WHERE p.id = l.path_id) AS nvtx_range,
       (SELECT o.nvtx_path FROM launch_nvtx o WHERE o.launch_id = l.id
        UNION ALL SELECT p.path FROM nvtx_path p WHERE p.id = l.path_id) AS nvtx_path,
       l.start_ns, l.end_ns, l.duration_ns, l.grid_x, l.grid_y, l.grid_z, l.block_x, l.block_y, l.block_z,
       l.registers_per_thread, l.shared_mem_static, l.shared_mem_dynamic, l.stream, l.device, l.correlation_id,
       (SELECT n.name FROM launch_name n WHERE n.id = l.api_id) AS api_name,
       l.api_start_ns, l.api_end_ns, l.pid, l.tid, l.timeline_id, l.rank, l.sampled_from, l.path_id
FROM launch_row l;
-- launches are written to launch_row (the store); a write to the view says so, and profkit
-- sql's authorizer refuses it by name as it refused one to the table
CREATE TRIGGER launch_insert INSTEAD OF INSERT ON launch
BEGIN SELECT RAISE(ABORT, 'launch is a view (schema 10): its rows are written to launch_row'); END;
CREATE TRIGGER launch_update INSTEAD OF UPDATE ON launch
BEGIN SELECT RAISE(ABORT, 'launch is a view (schema 10): its rows are written to launch_row'); END;
CREATE TRIGGER launch_delete INSTEAD OF DELETE ON launch
BEGIN SELECT RAISE(ABORT, 'launch is a view (schema 10): its rows are written to launch_row'); END;
CREATE VIEW kernels AS
SELECT l.run, l.id AS kernel_id, l.kernel_name, l.short_name, l.nvtx_range, l.nvtx_path,
       l.start_ns, l.end_ns, l.duration_ns, l.grid_x, l.grid_y, l.grid_z, l.block_x, l.block_y, l.block_z,
       l.registers_per_thread, l.stream, l.device, l.source,
       l.shared_mem_static, l.shared_mem_dynamic, l.api_name, l.api_start_ns, l.api_end_ns, l.pid, l.tid, l.rank,
       l.sampled_from, p.names AS nvtx_names
FROM launch l LEFT JOIN nvtx_path p ON p.id = l.path_id
WHERE l.timeline_id IS NULL;
CREATE VIEW counters AS
SELECT l.run, COALESCE(l.timeline_id, l.id) AS kernel_id, l.kernel_name, l.nvtx_range,
       c.metric, c.unit, c.value, l.rank
FROM counter c JOIN launch l ON l.id = c.launch_id;
CREATE VIEW classifications AS
SELECT k.run, k.kernel_id, k.kernel_name, k.nvtx_range, l.label, l.reason, l.evidence, k.rank, k.sampled_from
FROM label l JOIN kernels k ON k.kernel_id = l.kernel_id;
CREATE VIEW rules AS
SELECT l.run, COALESCE(l.timeline_id, l.id) AS kernel_id, r.rule, r.severity, r.message, r.estimated_speedup_pct,
       r.speedup_type, r.section, l.kernel_name, l.nvtx_range, l.rank
FROM rule_result r JOIN launch l ON l.id = r.launch_id;
""",
    )
)
# No index on nvtx_event(file_id) (issue 19): nothing reads ranges by file (they are read by run,
# which that index never served), and keeping it cost a bulk load of 1 M ranges 0.15-0.2 s of
# its 3.2 s (benchmarks/results/ingest.md) and 11 MB.
MIGRATIONS.append(
    (
        11,
        "nvtx_event: no index by file (nothing reads ranges by file)",
        """
DROP INDEX IF EXISTS nvtx_event_file;
""",
    )
)
# Kernel families (issue 50 item 2): who wrote each kernel decides the levers advise may name.
# A name's family is profkit.core.families.family_of(name), stored once per distinct name;
# migrate() gives the backfill that function as profkit_family(). An unmangled name the name
# alone cannot place ('other') launched through the driver call Triton uses is user Triton:
# the kernels view says so per launch, as families.explain(name, api_name) does.
MIGRATIONS.append(
    (
        12,
        "launch_name.family: each kernel's family; the kernels view shows it",
        """
ALTER TABLE launch_name ADD COLUMN family TEXT;
UPDATE launch_name SET family = profkit_family(name);
DROP VIEW classifications;
DROP VIEW kernels;
CREATE VIEW kernels AS
SELECT l.run, l.id AS kernel_id, l.kernel_name, l.short_name, l.nvtx_range, l.nvtx_path,
       l.start_ns, l.end_ns, l.duration_ns, l.grid_x, l.grid_y, l.grid_z, l.block_x, l.block_y, l.block_z,
       l.registers_per_thread, l.stream, l.device, l.source,
       l.shared_mem_static, l.shared_mem_dynamic, l.api_name, l.api_start_ns, l.api_end_ns, l.pid, l.tid, l.rank,
       l.sampled_from, p.names AS nvtx_names,
       (SELECT CASE WHEN n.family = 'other' AND n.name NOT GLOB '*[^A-Za-z0-9_]*'
                         AND (l.api_name IN ('cuLaunchKernel', 'cuLaunchKernelEx') OR l.api_name GLOB 'cuLaunchKernel_v*'
                              OR l.api_name GLOB 'cuLaunchKernelEx_v*')
                    THEN 'triton_user' ELSE n.family END
        FROM launch_row r JOIN launch_name n ON n.id = r.name_id WHERE r.id = l.id) AS family
FROM launch l LEFT JOIN nvtx_path p ON p.id = l.path_id
WHERE l.timeline_id IS NULL;
CREATE VIEW classifications AS
SELECT k.run, k.kernel_id, k.kernel_name, k.nvtx_range, l.label, l.reason, l.evidence, k.rank, k.sampled_from
FROM label l JOIN kernels k ON k.kernel_id = l.kernel_id;
""",
    )
)
# migrate() runs every migration with foreign keys off (one rebuilds a table others reference):
# version -> (tables before it, the same tables after it) whose broken references it must not add
MIGRATIONS.append(
    (
        13,
        "phases: start-up, compile/autotune, warm-up, steps, later phases of a run",
        """
CREATE TABLE phase (
    run            TEXT NOT NULL REFERENCES run(run),
    seq            INTEGER NOT NULL,             -- order in the run, 1 first
    name           TEXT NOT NULL,                -- what --phase takes: startup, compile, steps, ...
    kind           TEXT NOT NULL,                -- startup | compile | warmup | steps | repeated | after
    start_ns       INTEGER NOT NULL,             -- GPU window of its launches
    end_ns         INTEGER NOT NULL,
    launches       INTEGER NOT NULL,
    gpu_ns         REAL NOT NULL,                -- kernel time
    steps          INTEGER,                      -- repetitions of a step phase
    step_ns        REAL,                         -- median window per step
    step_spread_ns REAL,                         -- median absolute deviation of the step windows
    steady         INTEGER NOT NULL DEFAULT 0,   -- 1: the steady state analyses default to
    how            TEXT NOT NULL,                -- how it was found
    PRIMARY KEY (run, seq)
);
CREATE VIEW phases AS
SELECT run, seq, name AS phase, kind, start_ns, end_ns, launches, gpu_ns, steps, step_ns, step_spread_ns, steady, how
FROM phase;
""",
    )
)

# Source Counters of ncu reports (ncu --import-source yes --section SourceCounters): one row per
# SASS instruction of a profiled launch, and the source files the report embeds (by line)
MIGRATIONS.append(
    (
        14,
        "sass, source_lines: per-instruction Source Counters and embedded source",
        """
CREATE TABLE sass_row (
    launch_id          INTEGER NOT NULL REFERENCES launch_row(id),
    pc                 INTEGER NOT NULL,        -- offset from the function's first instruction
    address            INTEGER,                 -- absolute, as the report has it
    instruction        TEXT,
    file               TEXT,                    -- source file and line (binaries built with line info)
    line               INTEGER,
    inst_executed      INTEGER,                 -- warp-level instructions executed
    samples            INTEGER,                 -- warp-state samples at this PC (all reasons)
    samples_not_issued INTEGER,                 -- of them, samples where the warp issued nothing
    stalls             TEXT NOT NULL DEFAULT '{}',  -- JSON {reason: samples}, nonzero reasons, most first
    stalls_not_issued  TEXT NOT NULL DEFAULT '{}',
    PRIMARY KEY (launch_id, pc)
) WITHOUT ROWID;
CREATE TABLE source_text (
    file_id  INTEGER NOT NULL REFERENCES report_file(id),
    file     TEXT NOT NULL,
    line     INTEGER NOT NULL,
    text     TEXT NOT NULL,
    PRIMARY KEY (file_id, file, line)
) WITHOUT ROWID;
CREATE VIEW sass AS
SELECT l.run, COALESCE(l.timeline_id, l.id) AS kernel_id, l.kernel_name, s.pc, s.address, s.instruction, s.file,
       s.line, s.inst_executed, s.samples, s.samples_not_issued, s.stalls, s.stalls_not_issued, l.rank
FROM sass_row s JOIN launch l ON l.id = s.launch_id;
CREATE VIEW source_lines AS
SELECT g.run, g.kernel_id, g.kernel_name, g.file, g.line, g.inst_executed, g.samples, g.samples_not_issued,
       (SELECT json_group_object(key, n) FROM (
            SELECT j.key, sum(j.value) AS n FROM sass_row s2, json_each(s2.stalls) j
            WHERE s2.launch_id = g.launch_id AND s2.file IS g.file AND s2.line IS g.line
            GROUP BY j.key ORDER BY n DESC)) AS stalls,
       (SELECT t.text FROM source_text t WHERE t.file_id = g.file_id AND t.file = g.file AND t.line = g.line) AS text,
       g.rank
FROM (SELECT l.run, COALESCE(l.timeline_id, l.id) AS kernel_id, l.kernel_name, l.rank, l.file_id, s.launch_id,
             s.file, s.line, sum(s.inst_executed) AS inst_executed, sum(s.samples) AS samples,
             sum(s.samples_not_issued) AS samples_not_issued
      FROM sass_row s JOIN launch l ON l.id = s.launch_id
      GROUP BY s.launch_id, s.file, s.line) g;
""",
    )
)

# The operator table (issue 52): operators with recorded shapes and the kernels they launched
# (one operator per launch: the innermost with shapes that held its launch call). family,
# flops, min_bytes and note are the operator model's, filled by the analyses (the model sits
# above the store); trace_flops is what torch.profiler's with_flops counted itself.
MIGRATIONS.append(
    (
        15,
        "ops: operators with recorded shapes, the kernels they launched, their model",
        """
CREATE TABLE op_row (
    id             INTEGER PRIMARY KEY,
    run            TEXT NOT NULL REFERENCES run(run),
    file_id        INTEGER NOT NULL REFERENCES report_file(id),
    rank           INTEGER,
    op             TEXT NOT NULL,               -- aten::addmm, nccl:all_reduce, ...
    start_ns       INTEGER,                     -- host-side span of the operator
    end_ns         INTEGER,
    pid            INTEGER,
    tid            INTEGER,
    input_dims     TEXT,                        -- JSON, as the trace wrote them
    input_types    TEXT,                        -- JSON
    input_strides  TEXT,                        -- JSON
    concrete       TEXT,                        -- JSON: concrete scalar inputs
    trace_flops    REAL,                        -- the trace's own count (with_flops)
    source         TEXT NOT NULL,               -- record_shapes | nvtx
    family         TEXT,                        -- the operator model's family (NULL: not modelled yet)
    flops          REAL,                        -- the model's FLOPs
    min_bytes      REAL,                        -- the model's minimum DRAM bytes (bus bytes for a collective)
    precision      TEXT,
    note           TEXT                         -- the model's assumption, or why it has no numbers
);
CREATE INDEX op_row_run ON op_row(run);
CREATE TABLE op_launch (
    launch_id      INTEGER PRIMARY KEY REFERENCES launch_row(id),
    op_id          INTEGER NOT NULL REFERENCES op_row(id)
);
CREATE INDEX op_launch_op ON op_launch(op_id);
CREATE VIEW ops AS
SELECT o.run, o.id AS op_id, o.op, o.input_dims, o.input_types, o.concrete, o.family, o.flops, o.min_bytes,
       o.precision, o.trace_flops, o.note, o.source, o.rank, o.start_ns, o.end_ns,
       (SELECT count(*) FROM op_launch l WHERE l.op_id = o.id) AS kernels,
       (SELECT sum(r.duration_ns) FROM op_launch l JOIN launch_row r ON r.id = l.launch_id
        WHERE l.op_id = o.id) AS gpu_ns,
       (SELECT group_concat(l.launch_id) FROM op_launch l WHERE l.op_id = o.id) AS kernel_ids
FROM op_row o;
""",
    )
)

MIGRATIONS.append(
    (
        16,
        "host calls and GPU memory operations: the causes of idle time",
        """
CREATE TABLE host_call (
    run      TEXT NOT NULL REFERENCES run(run),
    file_id  INTEGER REFERENCES report_file(id),
    rank     INTEGER,
    kind     TEXT NOT NULL,                  -- sync | alloc | module | memcpy | memset
    name     TEXT NOT NULL,                  -- the call (cudaStreamSynchronize, cuLibraryLoadData, ...)
    start_ns INTEGER NOT NULL,
    end_ns   INTEGER NOT NULL,
    pid      INTEGER,
    tid      INTEGER
);
CREATE INDEX host_call_run ON host_call(run, rank, start_ns);
CREATE TABLE gpu_copy (
    run       TEXT NOT NULL REFERENCES run(run),
    file_id   INTEGER REFERENCES report_file(id),
    rank      INTEGER,
    kind      TEXT NOT NULL,                 -- memcpy | memset
    direction TEXT,                          -- HtoD | DtoH | DtoD | HtoH | PtoP | ...; memset: device | host
    bytes     INTEGER,
    pageable  INTEGER NOT NULL DEFAULT 0,    -- 1: a side is pageable host memory
    start_ns  INTEGER NOT NULL,
    end_ns    INTEGER NOT NULL,
    stream    INTEGER
);
CREATE INDEX gpu_copy_run ON gpu_copy(run, rank, start_ns);
CREATE VIEW host_calls AS SELECT run, rank, kind, name, start_ns, end_ns, pid, tid FROM host_call;
CREATE VIEW gpu_copies AS
SELECT run, rank, kind, direction, bytes, pageable, start_ns, end_ns, stream FROM gpu_copy;
""",
    )
)

# A baseline outlives the run it was saved from (a CI job keeps it, the run may be deleted or
# never loaded here: `baseline import`), so it holds its own samples and no reference to run.
MIGRATIONS.append(
    (
        17,
        "baselines: per-call samples and comparability facts (profkit gate)",
        """
CREATE TABLE baseline (
    name        TEXT PRIMARY KEY,
    run         TEXT NOT NULL,                -- the run it was saved from (by name only)
    created_at  TEXT NOT NULL,
    facts       TEXT NOT NULL DEFAULT '{}'    -- JSON: gpu, driver, clocks, tools, shape, variants
);
CREATE TABLE baseline_sample (
    name        TEXT NOT NULL REFERENCES baseline(name) ON DELETE CASCADE,
    range_path  TEXT NOT NULL,                -- NVTX path of the range
    kernel      TEXT NOT NULL DEFAULT '',     -- '' for the whole range, else a kernel name in it
    seq         INTEGER NOT NULL,             -- order: the range's, then its kernels' launch order
    label       TEXT,                         -- profkit classify label (dominant, for a range)
    gpu_us      TEXT NOT NULL,                -- JSON list: GPU time of each call
    host_us     TEXT,                         -- JSON list: host time of each call but the last
    PRIMARY KEY (name, range_path, kernel)
);
""",
    )
)

# NVTX push/pop ranges are per thread, and a launch belongs to the ranges its own thread had
# open: autograd's backward and the optimizer's foreach kernels, launched from a worker thread
# with no range open, fell outside the `step N` they ran in. Such a launch takes the ranges open
# at its launch call on its process's lead thread (profkit.store.inherit), kept apart from its
# own path: ncu records NVTX per thread too, so linking (store/link.py) and capture's sampling
# read the own path (`launch`); the `kernels` view shows the path that holds the launch
# (`nvtx_inherited` 1 where it is the lead thread's) and `nvtx_tid` the thread it is read on.
# Its columns are one-row subqueries, not CASE, so that they keep their declared types.
MIGRATIONS.append(
    (
        18,
        "launch_inherit: launches outside any range take the lead thread's ranges",
        """
CREATE TABLE launch_inherit (
    launch_id  INTEGER PRIMARY KEY REFERENCES launch_row(id),
    path_id    INTEGER NOT NULL REFERENCES nvtx_path(id),  -- the lead thread's ranges at its launch call
    tid        INTEGER                                     -- the lead thread
);
DROP VIEW classifications;
DROP VIEW kernels;
CREATE VIEW kernels AS
SELECT l.run, l.id AS kernel_id, l.kernel_name, l.short_name,
       (SELECT ip.text WHERE i.launch_id IS NOT NULL UNION ALL SELECT l.nvtx_range) AS nvtx_range,
       (SELECT ip.path WHERE i.launch_id IS NOT NULL UNION ALL SELECT l.nvtx_path) AS nvtx_path,
       l.start_ns, l.end_ns, l.duration_ns, l.grid_x, l.grid_y, l.grid_z, l.block_x, l.block_y, l.block_z,
       l.registers_per_thread, l.stream, l.device, l.source,
       l.shared_mem_static, l.shared_mem_dynamic, l.api_name, l.api_start_ns, l.api_end_ns, l.pid, l.tid, l.rank,
       l.sampled_from,
       (SELECT ip.names WHERE i.launch_id IS NOT NULL UNION ALL SELECT p.names) AS nvtx_names,
       (SELECT CASE WHEN n.family = 'other' AND n.name NOT GLOB '*[^A-Za-z0-9_]*'
                         AND (l.api_name IN ('cuLaunchKernel', 'cuLaunchKernelEx') OR l.api_name GLOB 'cuLaunchKernel_v*'
                              OR l.api_name GLOB 'cuLaunchKernelEx_v*')
                    THEN 'triton_user' ELSE n.family END
        FROM launch_row r JOIN launch_name n ON n.id = r.name_id WHERE r.id = l.id) AS family,
       i.launch_id IS NOT NULL AS nvtx_inherited,
       (SELECT i.tid WHERE i.launch_id IS NOT NULL UNION ALL SELECT l.tid) AS nvtx_tid
FROM launch l LEFT JOIN nvtx_path p ON p.id = l.path_id
     LEFT JOIN launch_inherit i ON i.launch_id = l.id LEFT JOIN nvtx_path ip ON ip.id = i.path_id
WHERE l.timeline_id IS NULL;
CREATE VIEW classifications AS
SELECT k.run, k.kernel_id, k.kernel_name, k.nvtx_range, l.label, l.reason, l.evidence, k.rank, k.sampled_from
FROM label l JOIN kernels k ON k.kernel_id = l.kernel_id;
""",
    )
)

# compare reads a run's labels as codes: through label_run each row's page is read, its reason
# and ~800 bytes of evidence with it (a gigabyte at 1 M launches); this index holds only what it
# reads, and serves label_run's lookups by run too
MIGRATIONS.append(
    (
        19,
        "label_run_kernel_label: a run's labels without their evidence",
        """
CREATE INDEX label_run_kernel_label ON label(run, kernel_id, label);
DROP INDEX label_run;
""",
    )
)

# emit_nvtx's tensor identity: which operator produced each input, so a range's fusion floor
# sees the tensors that leave it (read by an operator after the range)
MIGRATIONS.append(
    (
        20,
        "op_row: the operator's torch op id and its inputs' producers",
        """
ALTER TABLE op_row ADD COLUMN torch_op_id INTEGER;
ALTER TABLE op_row ADD COLUMN input_op_ids TEXT;
""",
    )
)

# A label's evidence is stored once per distinct JSON (issue 53): most launches of a run share
# theirs but for the timeline (duration, launch call, idle gap), which stays with each launch as
# columns and is spliced back in by the classifications view (head || timeline || tail), the
# same text as one JSON a launch. A reason is the evidence row's unless the launch names its own
# (a launch-overhead reason carries its times). Labels stored before keep their whole JSON in
# label.evidence (no evidence row) and read the same. The table is rebuilt the 12-step way to
# lift NOT NULL off reason and evidence. The view's columns are one-row subqueries, not CASE,
# so that they keep their declared types (a compound's is its last part's: a column, not the splice).
MIGRATIONS.append(
    (
        21,
        "label_evidence: a label's evidence once per distinct JSON, the timeline per launch",
        """
DROP VIEW classifications;
CREATE TABLE label_evidence (
    id      INTEGER PRIMARY KEY,
    run     TEXT NOT NULL,
    rule    TEXT,                               -- the rule that gave the label (the JSON's "rule")
    reason  TEXT NOT NULL,                      -- the reason of its launches that have none of their own
    head    TEXT NOT NULL,                      -- the JSON, or with tail: the JSON before the timeline
    tail    TEXT                                -- the JSON after the timeline (NULL: head is all of it)
);
CREATE INDEX label_evidence_run ON label_evidence(run);
CREATE TABLE label_compact (
    kernel_id    INTEGER PRIMARY KEY REFERENCES launch_row(id),
    run          TEXT NOT NULL,
    label        TEXT NOT NULL,
    reason       TEXT,                          -- NULL: its evidence row's
    evidence_id  INTEGER REFERENCES label_evidence(id),
    api_ns       INTEGER,                       -- the timeline's launch call, duration and idle gap
    duration_ns  INTEGER,                       -- before it on its stream (the evidence's "timeline",
    gap_ns       INTEGER,                       -- where its evidence row has a tail)
    evidence     TEXT                           -- the whole JSON of a label stored before schema 21
);
INSERT INTO label_compact (kernel_id, run, label, reason, evidence)
SELECT kernel_id, run, label, reason, evidence FROM label ORDER BY kernel_id;
DROP TABLE label;
ALTER TABLE label_compact RENAME TO label;
CREATE INDEX label_run_kernel_label ON label(run, kernel_id, label);
CREATE VIEW classifications AS
SELECT k.run, k.kernel_id, k.kernel_name, k.nvtx_range, l.label,
       (SELECT l.reason WHERE l.reason IS NOT NULL UNION ALL SELECT e.reason) AS reason,
       (SELECT l.evidence WHERE l.evidence IS NOT NULL
        UNION ALL SELECT e.head || '{"api_ns": ' || ifnull(l.api_ns, 'null') || ', "duration_ns": '
                         || ifnull(l.duration_ns, 'null') || ', "gap_ns": ' || ifnull(l.gap_ns, 'null') || '}' || e.tail
                  WHERE e.tail IS NOT NULL
        UNION ALL SELECT e.head WHERE e.tail IS NULL
       ) AS evidence,
       k.rank, k.sampled_from
FROM label l LEFT JOIN label_evidence e ON e.id = l.evidence_id JOIN kernels k ON k.kernel_id = l.kernel_id;
""",
    )
)

REBUILDS = {
    10: (
        ("launch", "counter", "label", "rule_result"),
        ("launch_row", "launch_nvtx", "counter", "label", "rule_result"),
    ),
    21: (("label",), ("label",)),
}

# version -> what fills its tables from the rows already stored, where SQL alone cannot
BACKFILLS = {18: lambda conn: _inherit().backfill(conn)}


def _inherit():
    from profkit.store import inherit  # (imports the store's id helpers, which need no schema)

    return inherit


LATEST = MIGRATIONS[-1][0]

# The stable interface: view -> columns guaranteed to exist (checked by tests/test_schema.py).
VIEWS = {
    "runs": ("run", "created_at", "gpu_name", "source_files"),
    "kernels": (
        "run",
        "kernel_id",
        "kernel_name",
        "short_name",
        "nvtx_range",
        "nvtx_path",
        "start_ns",
        "end_ns",
        "duration_ns",
        "grid_x",
        "grid_y",
        "grid_z",
        "block_x",
        "block_y",
        "block_z",
        "registers_per_thread",
        "stream",
        "device",
        "source",
        "rank",
        "sampled_from",
        "nvtx_names",
        "family",
        "nvtx_inherited",
        "nvtx_tid",
    ),
    "counters": ("run", "kernel_id", "kernel_name", "nvtx_range", "metric", "unit", "value", "rank"),
    "classifications": (
        "run",
        "kernel_id",
        "kernel_name",
        "nvtx_range",
        "label",
        "reason",
        "evidence",
        "rank",
        "sampled_from",
    ),
    "tuning": ("kernel", "shape", "gpu", "config", "ok", "ms", "rel_err", "error", "chosen"),
    "bench": (
        "op",
        "variant",
        "shape",
        "dtype",
        "gpu",
        "driver",
        "torch",
        "triton",
        "date",
        "ok",
        "ms",
        "gbps",
        "tflops",
        "pct_of_copy",
        "speedups",
    ),
    "advice": (
        "run",
        "rank",
        "scope",
        "nvtx_path",
        "kernel_name",
        "label",
        "share",
        "recoverable_ns",
        "action",
        "evidence",
    ),
    "sass": (
        "run",
        "kernel_id",
        "kernel_name",
        "pc",
        "address",
        "instruction",
        "file",
        "line",
        "inst_executed",
        "samples",
        "samples_not_issued",
        "stalls",
        "stalls_not_issued",
        "rank",
    ),
    "source_lines": (
        "run",
        "kernel_id",
        "kernel_name",
        "file",
        "line",
        "inst_executed",
        "samples",
        "samples_not_issued",
        "stalls",
        "text",
        "rank",
    ),
    "ops": (
        "run",
        "op_id",
        "op",
        "input_dims",
        "input_types",
        "concrete",
        "family",
        "flops",
        "min_bytes",
        "precision",
        "trace_flops",
        "note",
        "source",
        "rank",
        "kernels",
        "gpu_ns",
        "kernel_ids",
    ),
    "host_calls": ("run", "rank", "kind", "name", "start_ns", "end_ns", "pid", "tid"),
    "gpu_copies": ("run", "rank", "kind", "direction", "bytes", "pageable", "start_ns", "end_ns", "stream"),
    "rules": (
        "run",
        "kernel_id",
        "rule",
        "severity",
        "message",
        "estimated_speedup_pct",
        "speedup_type",
        "section",
        "kernel_name",
        "nvtx_range",
        "rank",
    ),
}


def now() -> str:
    """The time profkit records (a run made, a file loaded, a migration applied): UTC, seconds."""
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


# Indexes a load into an empty table may drop and build once when it ends (store.write.
# indexes_after): the counters' metric index took ~1 s more CPU row by row through the main
# job's 233 k counters (420 metrics, each row a jump across the index) than one build (0.1 s).
# The text is migration 1's, as sqlite_master holds it; a writer that finds one missing (a
# load killed before its end) builds it again (restore_indexes).
DEFERRABLE_INDEXES = {"counter_metric": "CREATE INDEX counter_metric ON counter(metric)"}


def restore_indexes(conn: sqlite3.Connection) -> None:
    """Build each deferrable index the database lacks."""
    have = {n for (n,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'index'")}
    missing = [sql for name, sql in DEFERRABLE_INDEXES.items() if name not in have]
    if missing:
        with transaction(conn):
            for sql in missing:  # (sqlite_master keeps the text without IF NOT EXISTS)
                conn.execute(sql.replace("CREATE INDEX", "CREATE INDEX IF NOT EXISTS", 1))


def schema_version(conn: sqlite3.Connection) -> int:
    try:
        row = conn.execute("SELECT max(version) FROM schema_migrations").fetchone()
        return row[0] or 0
    except sqlite3.OperationalError:
        return 0


def migrate(conn: sqlite3.Connection) -> int:
    """Apply pending migrations in one transaction. Returns the version reached."""
    if schema_version(conn) >= LATEST:
        return LATEST
    # off while a migration rebuilds a table others reference (SQLite's 12-step ALTER: its
    # DROP TABLE would delete the referencing rows' parents); the references are checked below
    fk = conn.execute("PRAGMA foreign_keys").fetchone()[0]
    conn.execute("PRAGMA foreign_keys = OFF")
    try:
        with transaction(conn):
            conn.execute(
                "CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, name TEXT, applied_at TEXT)"
            )
            conn.create_function("profkit_family", 1, family_of, deterministic=True)  # migration 12's backfill
            have = schema_version(conn)
            for version, name, sql in MIGRATIONS:
                if version > have:
                    before, after = REBUILDS.get(version, ((), ()))
                    broken = _broken_references(conn, before)
                    for stmt in statements(sql):
                        conn.execute(stmt)
                    if _broken_references(conn, after) > broken:
                        raise ProfkitError(
                            f"internal: migration {version} ({name}) broke references between "
                            f"tables; the database is left as it was"
                        )
                    if version in BACKFILLS:
                        BACKFILLS[version](conn)
                    conn.execute("INSERT INTO schema_migrations VALUES (?, ?, ?)", (version, name, now()))
    finally:
        conn.execute(f"PRAGMA foreign_keys = {'ON' if fk else 'OFF'}")
    return LATEST


def _broken_references(conn: sqlite3.Connection, tables) -> int:
    """Rows of these tables (those that exist) whose foreign keys point at nothing."""
    have = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    return sum(len(conn.execute(f'PRAGMA foreign_key_check("{t}")').fetchall()) for t in tables if t in have)


def statements(sql: str):
    """The statements of a migration's script, one at a time."""
    buf = ""
    for line in sql.splitlines(keepends=True):
        buf += line
        if sqlite3.complete_statement(buf):
            if buf.strip():
                yield buf
            buf = ""
