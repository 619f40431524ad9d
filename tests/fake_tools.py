"""Stand-in nsys and ncu for capture tests without a GPU: each logs its arguments, runs the
program it was given, and writes a real report (by default the H100 field workload's nsys
export and its per-launch-config ncu report, tests/data/field-h100/)."""
import stat
import sys

from profdata import DATA

WS = DATA / "field-h100" / "ws.nsys.sqlite"
PERCONFIG = DATA / "field-h100" / "ws_perconfig.ncu-rep.xz"

FAKE = r'''#!{python}
"""A stand-in {tool}: logs its argv, runs the program, writes a real report."""
import json, lzma, os, shutil, subprocess, sys
argv = sys.argv[1:]
with open({log!r}, "a") as f:
    f.write(json.dumps({{"tool": "{tool}", "argv": argv}}) + "\n")
if argv[:1] == ["--version"]:
    print("fake {tool} 1.0"); sys.exit(0)
if argv[:1] == ["export"]:
    shutil.copy({nsys_sqlite!r}, argv[argv.index("-o") + 1]); sys.exit(0)
out = argv[argv.index("-o") + 1]
at = next(i for i, a in enumerate(argv) if a in ("--metrics", "--set")) + 2 if "{tool}" == "ncu" else argv.index("-o") + 2
rc = subprocess.call(argv[at:])
if "{tool}" == "nsys":
    open(out + ".nsys-rep", "wb").write(b"fake")
else:
    for i in range({profiled}):
        print('==PROF== Profiling "kernel" - %d (1/1): 0%%....50%%....100%% - 1 pass' % i)
    {ncu_write}
    if rc:
        print("==ERROR== The application returned an error code (%d)." % rc)
sys.exit(rc)
'''


def fake(tmp_path, tool, nsys_sqlite=WS, ncu_report=PERCONFIG, profiled=12, ncu_write=None):
    log = tmp_path / "log.jsonl"
    write = ncu_write or f"open(out + '.ncu-rep', 'wb').write(lzma.open({str(ncu_report)!r}).read())"
    p = tmp_path / tool
    p.write_text(FAKE.format(python=sys.executable, tool=tool, log=str(log), nsys_sqlite=str(nsys_sqlite),
                             profiled=profiled, ncu_write=write))
    p.chmod(p.stat().st_mode | stat.S_IEXEC)
    return str(p)


