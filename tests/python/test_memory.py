"""Memory that fits the machine: `train` estimates its peak once the keys
and the target are read, before the features are, and a job over the limit
(`--max-memory`, else the memory available) fails at once with one line.

The estimate is checked against the measured peak (the CLI's `VmHWM`, in
the summary) on the benchmark shape scaled to 1M rows: 32 `float32`
features, 1,000 Zipf(1.1) groups with text keys, a validation file of a
fifth of the rows; every family, with and without the global model, and a
grid of 4 configs."""

import json
import subprocess
import sys

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import groupfit as gf
from groupfit.exceptions import ArgumentError, MemoryLimitError
from conftest import binary_path, run

ROWS = 1_000_000
FEATURES = 32
TOLERANCE = 0.30


@pytest.fixture(scope="module")
def bench(tmp_path_factory):
    """The benchmark shape (shared/bench/datagen.py's), at 1M rows."""
    d = tmp_path_factory.mktemp("memory")
    rng = np.random.default_rng(0)
    w = 1 / np.arange(1, 1001) ** 1.1
    group = rng.choice(1000, size=ROWS, p=w / w.sum())
    x = rng.standard_normal((ROWS, FEATURES)).astype(np.float32)
    y = (x[:, 0] + 0.5 * x[:, 1] + rng.standard_normal(ROWS) > 0).astype(np.float32)
    keys = np.array([f"g{i:05d}" for i in range(1000)])[group]
    table = pa.table({"group": keys, **{f"f{j}": x[:, j] for j in range(FEATURES)}, "label": y})
    cut = ROWS * 4 // 5
    pq.write_table(table.slice(0, cut), d / "train.parquet")
    pq.write_table(table.slice(cut), d / "valid.parquet")
    return d


def train(d, *args):
    return run("train", "--data", d / "train.parquet", "--valid", d / "valid.parquet",
               "--by", "group", "--target", "label", "--out", d / "m.gfm", "--json", *args,
               timeout=300)


SHAPES = [
    ("linear", []),
    ("linear", ["--no-global"]),
    ("linear", ["--param", "C=0.1,1,10,100"]),
    ("gbdt", ["--param", "rounds=10"]),
    ("gbdt", ["--param", "rounds=10", "--no-global"]),
    ("gbdt", ["--param", "rounds=10", "--param", "learning_rate=0.05,0.1,0.2,0.3"]),
    ("mlp", ["--param", "epochs=1"]),
    ("mlp", ["--param", "epochs=1", "--no-global"]),
    ("mlp", ["--param", "epochs=1", "--param", "lr=0.001,0.003,0.01,0.03"]),
]


@pytest.mark.parametrize("model,args", SHAPES, ids=[f"{m}{''.join(a)}" for m, a in SHAPES])
def test_the_estimate_is_within_30_percent_of_the_peak(bench, model, args):
    code, out, err = train(bench, "--model", model, *args)
    assert code == 0, err
    memory = json.loads(out)["memory"]
    estimate, peak = memory["estimate"]["bytes"], memory["peak_bytes"]
    parts = ", ".join(f"{n} {b / 2**20:.0f}" for n, b in memory["estimate"]["parts"])
    print(f"{model} {' '.join(args)}: peak {peak / 2**20:.0f} MiB, estimate {estimate / 2**20:.0f} MiB "
          f"({estimate / peak:.2f}): {parts}")
    assert abs(estimate - peak) <= TOLERANCE * peak, (estimate, peak, parts)
    assert memory["limit"]["bytes"] > 0 and memory["limit"]["source"]


def peak_of_child(*args):
    """Runs the binary with `args` in a fresh process; returns (code,
    stderr, the child's peak resident set in MiB)."""
    probe = (
        "import resource, subprocess, sys\n"
        "p = subprocess.run(sys.argv[1:], capture_output=True, text=True)\n"
        "sys.stderr.write(p.stderr)\n"
        "print(p.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n"
    )
    p = subprocess.run([sys.executable, "-c", probe, str(binary_path()), *map(str, args)],
                       capture_output=True, text=True, timeout=120)
    code, kib = map(int, p.stdout.split())
    return code, p.stderr, kib / 1024


def test_a_job_over_max_memory_fails_before_reading_its_features(bench):
    out = bench / "refused.gfm"
    code, err, peak_mib = peak_of_child(
        "train", "--data", bench / "train.parquet", "--valid", bench / "valid.parquet",
        "--by", "group", "--target", "label", "--out", out, "--max-memory", "200M")
    assert code == 1
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    line = lines[0]
    assert line.startswith("error: training '") and "train.parquet" in line
    assert "needs about" in line and "layout" in line
    assert "more than the 200 MB it may use (--max-memory)" in line
    assert "--no-global" in line and "the Ray runner" in line
    assert not out.exists()
    # The training features alone are 98 MiB as f32: they were never read.
    features_mib = ROWS * 4 // 5 * FEATURES * 4 / 2**20
    assert peak_mib < features_mib, peak_mib


def test_max_memory_takes_sizes_as_people_write_them(bench):
    code, _, err = train(bench, "--max-memory", "4X")
    assert code == 1 and "--max-memory: cannot read '4X' as a size" in err
    code, out, err = train(bench, "--max-memory", "64G")
    assert code == 0, err
    assert json.loads(out)["memory"]["limit"] == {"bytes": 64 << 30, "source": "--max-memory"}


def test_python_raises_memory_limit_error(bench):
    path = str(bench / "train.parquet")
    with pytest.raises(MemoryLimitError, match="it may use \\(--max-memory\\)"):
        gf.fit(path, by="group", target="label", max_memory="100M")
    table = pq.read_table(path)
    # In memory, the table's float32 columns are shared: the estimate is
    # what training adds (the layout), still over 50 MB here.
    with pytest.raises(MemoryLimitError, match="layout"):
        gf.fit(table, by="group", target="label", max_memory=50 << 20)
    for bad in (0, "4X", "-1G"):
        with pytest.raises(ArgumentError, match="max_memory: cannot read"):
            gf.fit(table, by="group", target="label", max_memory=bad)
    model = gf.fit(table.slice(0, 50_000), by="group", target="label", max_memory="8G")
    memory = model.summary["memory"]
    assert memory["limit"] == {"bytes": 8 << 30, "source": "--max-memory"}
    assert 0 < memory["estimate"]["bytes"] < 8 << 30
    assert gf.explain(table.slice(0, 50_000), by="group", target="label", max_memory="1M")


def test_explain_shows_the_estimate_train_checks(bench):
    args = ["--data", bench / "train.parquet", "--valid", bench / "valid.parquet",
            "--by", "group", "--target", "label", "--model", "mlp", "--param", "epochs=1"]
    code, out, err = run("explain", *args, "--json", "--max-memory", "100M")
    assert code == 0, err
    planned = json.loads(out)
    assert planned["memory_limit"] == {"bytes": 100 << 20, "source": "--max-memory"}
    code, out, err = train(bench, "--model", "mlp", "--param", "epochs=1")
    assert code == 0, err
    assert planned["memory"] == json.loads(out)["memory"]["estimate"]
    code, out, _ = run("explain", *args, "--max-memory", "100M")
    line = next(l for l in out.splitlines() if l.startswith("memory: "))
    assert line.startswith("memory: training needs about ") and "layout" in line
    assert line.endswith("over the limit of 100 MB (--max-memory)")
