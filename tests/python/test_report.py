"""`groupfit report` and `GroupedModel.report`: one self-contained HTML file
of plots, checked as a user sees it, rendered in headless Chromium.

`make test` installs Chromium from Debian's packages (`make browser`)."""

from __future__ import annotations

import re
import shutil
import struct
import subprocess
import time
import zlib
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import groupfit as gf
from groupfit.exceptions import MissingColumnError, ModelFileError

from conftest import REPO, run

FLIGHTS = REPO / "data" / "flights.parquet"
# The demo's job (scripts/demo.sh).
DEMO = [
    "train", "--data", FLIGHTS, "--by", "origin,dest", "--target", "arr_delay",
    "--features", "month,day,dep_time,sched_dep_time,dep_delay,sched_arr_time,hour,minute,carrier",
    "--param", "C=0.01,0.1,1,10",
]


def plots(html: str) -> list[str]:
    """The SVG of each plot (`<figure class="plot">`)."""
    return re.findall(r'<figure class="plot">(<svg.*?</svg>)\s*<figcaption>', html, re.S)


def marks(svg: str) -> int:
    """Drawn elements in an SVG."""
    return sum(svg.count(m) for m in ("<circle", "<rect", "<polyline", "<path", "<line"))


def chromium() -> str:
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if exe is None:
        pytest.fail("headless Chromium is missing: `make browser` installs it (Debian's chromium)")
    return exe


def browse(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", *args],
        capture_output=True,
        timeout=120,
    )


def png_pixels(path: Path) -> tuple[int, int, list[bytes]]:
    """Width, height and rows of RGB(A) bytes of an 8-bit PNG (filters undone)."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, idat, width, height, channels = 8, b"", 0, 0, 0
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos : pos + 4])
        kind, body = data[pos + 4 : pos + 8], data[pos + 8 : pos + 8 + length]
        if kind == b"IHDR":
            width, height, depth, color = struct.unpack(">IIBB", body[:10])
            assert depth == 8 and color in (2, 6), (depth, color)
            channels = 3 if color == 2 else 4
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    raw, stride, rows, prev = zlib.decompress(idat), width * channels, [], bytearray(width * channels)
    for y in range(height):
        f, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1 : (y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - channels] if i >= channels else 0
            b, c = prev[i], prev[i - channels] if i >= channels else 0
            if f == 1:
                line[i] = (line[i] + a) & 255
            elif f == 2:
                line[i] = (line[i] + b) & 255
            elif f == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif f == 4:
                p = a + b - c
                pa_, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa_ <= pb and pa_ <= pc else b if pb <= pc else c)) & 255
        rows.append(bytes(line))
        prev = line
    return width, height, [bytes(r) for r in rows] if channels == 3 else [
        bytes(v for i, v in enumerate(r) if i % 4 != 3) for r in rows
    ]


@pytest.fixture(scope="module")
def demo(tmp_path_factory) -> Path:
    """The demo's model file."""
    out = tmp_path_factory.mktemp("demo") / "flights.gfm"
    rc, _, err = run(*DEMO, "--out", out)
    assert rc == 0, err
    return out


@pytest.fixture(scope="module")
def demo_report(demo) -> Path:
    out = demo.parent / "report.html"
    rc, _, err = run("report", demo, "--out", out)
    assert rc == 0, err
    assert err.startswith(f"wrote {out} (") and err.count("\n") == 1, err
    return out


def test_the_demo_report_is_one_self_contained_file(demo_report):
    html = demo_report.read_text()
    # No script, nothing fetched: no src, href, url() or import.
    for banned in ("<script", " src=", " href=", "url(", "@import", "<link", "<img"):
        assert banned not in html, banned
    shown = plots(html)
    # Metric by size, its spread, the gain, the routes, the configs, the cost, the coefficients.
    assert len(shown) == html.count('<figure class="plot">') >= 7
    for svg in shown:
        assert marks(svg) > 10, svg[:300]
    for heading in (
        "Validation RMSE by group size",
        "Per-group RMSE",
        "Gain over the global model on each group",
        "Routes",
        "Chosen configs",
        "Training cost by group size",
        "Coefficients over groups",
        "The 20 worst groups",
        "The 20 best groups",
    ):
        assert heading in html, heading
    # The header: family, keys, the grid, the global model and the command.
    for fact in ("linear", "origin, dest", "C=0.01; C=0.1; C=1; C=10", "groupfit train --data"):
        assert fact in html, fact
    assert len(html) < 5_000_000


def test_the_demo_report_renders_in_chromium(demo_report, tmp_path):
    shot = tmp_path / "report.png"
    r = browse("--window-size=1000,2400", f"--screenshot={shot}", demo_report.as_uri())
    assert shot.exists(), r.stderr.decode()[-2000:]
    width, height, rows = png_pixels(shot)
    assert (width, height) == (1000, 2400)
    pixels = [row[i : i + 3] for row in rows[::4] for i in range(0, len(row), 12)]
    drawn = [p for p in pixels if min(p) < 235]
    assert len(drawn) > 0.02 * len(pixels), f"{len(drawn)} of {len(pixels)} pixels drawn"
    assert len(set(pixels)) > 30, "too few colours for plots"
    # The browser's DOM has every plot, each an SVG with drawn children.
    dom = browse("--dump-dom", demo_report.as_uri()).stdout.decode()
    html_plots = plots(demo_report.read_text())
    dom_plots = re.findall(r'<figure class="plot">(<svg.*?</svg>)', dom, re.S)
    assert len(dom_plots) == len(html_plots)
    for svg in dom_plots:
        assert re.search(r'<svg[^>]* width="\d+" height="\d+"', svg) and marks(svg) > 10


def test_a_valid_file_adds_its_scores(demo, tmp_path):
    # The flights of December only: every route's own model serves its rows.
    held = pq.read_table(FLIGHTS).filter(pa.compute.equal(pa.compute.field("month"), 12))
    valid = tmp_path / "december.parquet"
    pq.write_table(held, valid)
    out = tmp_path / "r.html"
    rc, stdout, err = run("report", demo, "--out", out, "--valid", valid, "--json")
    assert rc == 0, err
    info = __import__("json").loads(stdout)
    html = out.read_text()
    assert info["bytes"] == len(html.encode()) and info["plots"] == len(plots(html))
    assert "Scores on the rows held out in training" in html
    assert "Scores on december.parquet" in html
    # Two sections of scores: the metric plots twice.
    assert html.count("Validation RMSE by group size") == 2
    assert re.search(r"[\d,]+ rows in december\.parquet", html)


def test_bad_input_gets_one_line_and_no_html(demo, tmp_path):
    out = tmp_path / "r.html"
    # A damaged model file: predict's error.
    broken = tmp_path / "broken.gfm"
    data = demo.read_bytes()
    broken.write_bytes(data[: len(data) // 2])
    rc, _, err = run("report", broken, "--out", out)
    assert rc == 1 and err.count("\n") == 1 and "broken.gfm" in err and "truncated" in err, err
    rc2, _, err2 = run("predict", "--model", broken, "--data", FLIGHTS, "--out", tmp_path / "p.parquet")
    assert err == err2
    # A --valid file without the target.
    valid = tmp_path / "no_target.parquet"
    pq.write_table(pq.read_table(FLIGHTS).drop(["arr_delay"]).slice(0, 100), valid)
    out.write_text("kept")
    rc, _, err = run("report", demo, "--out", out, "--valid", valid)
    assert rc == 1 and err.count("\n") == 1, err
    assert "'arr_delay'" in err and "no_target.parquet" in err, err
    assert out.read_text() == "kept"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["broken.gfm", "no_target.parquet", "r.html"]
    # An output in a missing folder fails before anything is read.
    rc, _, err = run("report", demo, "--out", tmp_path / "no" / "r.html")
    assert rc == 1 and "r.html" in err, err


def test_python_report_and_notebook_view(demo, tmp_path):
    model = gf.load(demo)
    path = model.report(tmp_path / "r.html")
    assert path == str(tmp_path / "r.html")
    html = Path(path).read_text()
    assert "groupfit report: flights.gfm" in html and len(plots(html)) >= 7
    inline = model._repr_html_()
    assert inline.startswith("<style>") and "<html" not in inline
    assert len(plots(inline)) == 2
    # In-memory validation rows, and their errors as exceptions.
    table = pq.read_table(FLIGHTS).slice(0, 20_000)
    model.report(tmp_path / "v.html", valid=table)
    assert "Scores on the valid table" in (tmp_path / "v.html").read_text()
    with pytest.raises(MissingColumnError, match="arr_delay"):
        model.report(tmp_path / "x.html", valid=table.drop(["arr_delay"]))
    assert not (tmp_path / "x.html").exists()
    broken = tmp_path / "b.gfm"
    broken.write_bytes(b"GROUPFIT" + bytes(40))
    with pytest.raises(ModelFileError):
        gf.load(broken).report(tmp_path / "y.html")


def synthetic(groups: int, rows: int, seed: int = 0) -> pa.Table:
    rng = np.random.default_rng(seed)
    n = groups * rows
    g = np.repeat(np.arange(groups), rows)
    x = rng.normal(size=(n, 3)).astype(np.float32)
    w = rng.normal(size=(groups, 3))
    margin = (x * w[g]).sum(axis=1)
    y = (rng.random(n) < 1 / (1 + np.exp(-margin))).astype(np.float64)
    return pa.table({"g": [f"g{i}" for i in g], "f0": x[:, 0], "f1": x[:, 1], "f2": x[:, 2], "y": y})


@pytest.mark.parametrize(
    "model, params, title",
    [
        ("gbdt", {"rounds": [10], "num_leaves": [4, 8]}, "Top features by summed gain"),
        ("mlp", {"hidden": [4], "epochs": [3], "lr": [0.01, 0.1]}, "Training loss per epoch, largest groups"),
    ],
)
def test_each_family_draws_its_own_plot(model, params, title, tmp_path):
    m = gf.fit(synthetic(30, 200), by="g", target="y", model=model, params=params)
    html = Path(m.report(tmp_path / "r.html")).read_text()
    assert title in html
    assert "Validation log-loss by group size" in html
    assert "groupfit.fit(data=&lt;pyarrow.Table&gt;, by=&#39;g&#39;" in html
    family_plot = plots(html)[-1]
    assert marks(family_plot) > 10


def test_twenty_thousand_groups_are_sampled_and_the_file_stays_small(tmp_path):
    data = synthetic(20_000, 12, seed=1)
    m = gf.fit(data, by="g", target="y", params={"C": [0.1, 1.0]}, min_rows=5)
    started = time.perf_counter()
    html = Path(m.report(tmp_path / "r.html")).read_text()
    seconds = time.perf_counter() - started
    print(f"report of 20,000 groups: {seconds:.2f} s, {len(html) / 1e6:.2f} MB")
    assert len(html.encode()) < 5_000_000
    # Points are sampled: at most 1,500 a plot, and the caption says so.
    sampled = re.findall(r"1,500 of ([\d,]+) groups are shown", html)
    assert sampled and all(int(n.replace(",", "")) > 1_500 for n in sampled), sampled
    for svg in plots(html):
        assert svg.count("<circle") <= 1_500 + 10
    # The tables stay at 20 rows each.
    assert html.count("<tr>") < 20 * 2 + 30
