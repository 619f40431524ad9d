"""A real browser opens the roofline HTML: headless Chromium (Debian's `chromium`, driven by
Python playwright; no browser download) must render the plot with every point, with no
console error, no page error and no request leaving the file.

Where Chromium or playwright is missing the test skips with the reason, except under CI
(env CI=1/true, which .ci/run sets): there it fails, because the README test command
installs Chromium when it is absent and the `test` extra installs playwright.
"""
import math
import os
import shutil

import pytest
from profdata import PROFILES

from profkit.analyses import roofline as rl
from profkit.outputs import roofline_plot as rp
from profkit.store.store import Store

CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync"]
IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")
RMSNORM = "rmsnorm-eager-vs-triton-h200"


def _missing(why: str):
    if IN_CI:
        pytest.fail(f"{why} (CI must run the browser test: the README test command installs chromium)")
    pytest.skip(why)


@pytest.fixture(scope="module")
def browser():
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _missing("python playwright is not installed (pip install -e '.[test]')")
    exe = os.environ.get("PROFKIT_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
    if not os.path.isfile(exe):
        _missing(f"no chromium ({exe}; Debian: apt-get install chromium, or set PROFKIT_CHROMIUM)")
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=exe, headless=True, args=CHROMIUM_FLAGS)
        yield b
        b.close()


@pytest.fixture(scope="module")
def store(profiles_db):
    s = Store(profiles_db)
    yield s
    s.close()


def _open(browser, path):
    """Load a file; return the page and what went wrong in it (console errors, page errors, requests)."""
    page = browser.new_page(viewport={"width": 1300, "height": 800})
    problems = []
    page.on("console", lambda m: problems.append(f"console {m.type}: {m.text}") if m.type == "error" else None)
    page.on("pageerror", lambda e: problems.append(f"page error: {e}"))

    def only_the_file(route):
        if route.request.url.startswith("file://"):
            route.continue_()
        else:  # self-contained: nothing may come from the network
            problems.append(f"request: {route.request.url}")
            route.abort()

    page.route("**/*", only_the_file)
    page.goto(path.as_uri(), wait_until="load")
    page.wait_for_selector(".js-plotly-plot .scatterlayer .trace .points path", timeout=30_000)
    return page, problems


_PLOTS = """() => Array.from(document.querySelectorAll('.js-plotly-plot')).map(gd => ({
    data_points: gd.data.filter(t => t.meta === 'points').reduce((n, t) => n + t.x.length, 0),
    dom_points: gd.querySelectorAll('.scatterlayer .trace .points path.point').length,
    ceilings: gd.data.filter(t => t.meta === 'ceiling').length,
    arrows: gd.querySelectorAll('.annotation-arrow-g').length,
    xlog: gd._fullLayout.xaxis.type, ylog: gd._fullLayout.yaxis.type,
}))"""


def test_compare_roofline_renders_in_chromium(browser, store, tmp_path):
    r = rl.collect(store, f"{RMSNORM}:eager", f"{RMSNORM}:triton")
    expected = sum(1 for _ in rp.drawn(r))
    assert expected == (5 + 1) * 3 + 2  # eager kernels with FLOPs + Triton, at 3 levels; 2 range stars
    path = rp.write_html(rp.figure(r), tmp_path / "roofline.html")
    page, problems = _open(browser, path)
    try:
        (plot,) = page.evaluate(_PLOTS)
        assert plot["data_points"] == expected
        assert plot["dom_points"] == expected  # every point drawn as an SVG marker
        assert plot["arrows"] == 1 and plot["ceilings"] >= 5
        assert (plot["xlog"], plot["ylog"]) == ("log", "log")
        # the arrow's head sits on the Triton range's star, in log10 axis coordinates
        head = page.evaluate("() => { const a = document.querySelector('.js-plotly-plot').layout.annotations"
                             ".find(a => a.showarrow); return [a.x, a.y]; }")
        after = r.arrows[0][1]
        assert head == pytest.approx([math.log10(after.intensity("dram")), math.log10(after.flop_rate)])
        # hovering the Triton kernel shows its name, range, label, time and % of roofline
        trace = page.evaluate("() => document.querySelector('.js-plotly-plot').data"
                              ".findIndex(t => t.meta === 'points' && t.name === 'dram (after)')")
        assert trace >= 0
        page.evaluate(f"() => Plotly.Fx.hover(document.querySelector('.js-plotly-plot'), "
                      f"[{{curveNumber: {trace}, pointNumber: 0}}])")
        text = page.evaluate("() => document.querySelector('.hoverlayer').textContent")
        for want in ("_rmsnorm_fwd", "rmsnorm/triton/qwen7b-t4096", "label: dram", "µs per call", "% of roofline"):
            assert want in text, (want, text)
        assert problems == []
    finally:
        page.close()


def test_main_job_roofline_file_renders_every_run(browser, store, tmp_path):
    rows = rp.write_runs(store, tmp_path / "roofline.html")
    page, problems = _open(browser, tmp_path / "roofline.html")
    try:
        plots = page.evaluate(_PLOTS)
        assert [p["dom_points"] for p in plots] == [r["points"] for r in rows if r["points"]]
        assert [p["data_points"] for p in plots] == [r["points"] for r in rows if r["points"]]
        assert len(plots) == len([r for r in rows if r["points"]]) >= 5  # one plot per run with counters
        assert {r["run"] for r in rows} == set(store.runs())
        assert {"e2e-decode", "ddp-2gpu-slow"} <= {r["run"] for r in rows if not r["points"]}  # timeline only
        assert problems == []
    finally:
        page.close()


def test_advise_page_renders_in_chromium(browser, store, tmp_path):
    """profkit advise --html: the time bars, the ranked table and the top items' roofline."""
    from profkit.analyses.advise import advise
    from profkit.model import peaks
    from profkit.outputs import advise_page

    measured = peaks.read(PROFILES / "peaks.json")
    a = advise(store, RMSNORM, peaks=measured)
    path = advise_page.write(store, a, tmp_path / "advise.html", peaks=measured)
    page, problems = _open(browser, path)
    try:
        n = page.evaluate("() => document.querySelectorAll('.js-plotly-plot').length")
        assert n == 2  # where the time goes; the roofline of the top items
        bars = page.evaluate("() => document.querySelector('.js-plotly-plot').querySelectorAll('.bars path').length")
        assert bars >= 2 * 2  # busy and idle of the eager and Triton ranges (at least)
        first = page.evaluate("() => Array.from(document.querySelectorAll('#advice tr')[1].cells).map(c => c.textContent)")
        assert first[0] == "1" and "rmsnorm/eager/qwen7b-t4096" in first[1] and first[6].startswith("fuse the 8 kernels")
        assert problems == []
    finally:
        page.close()
