"""Interrupted runs: SIGINT or SIGTERM during `train` or `predict` ends the
process within a second, with one line, exit 130 or 143, its temporary
files removed and an existing output left as it was. A SIGKILLed run leaves
at most a temporary file named as one, which a later run beside it removes
once it is an hour old."""

import os
import signal
import subprocess
import time

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from conftest import binary_path


def slow_data(path, rows: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    g = rng.integers(0, 20, rows)
    x = rng.standard_normal((rows, 6))
    y = (x[:, 0] + 0.5 * x[:, 1] * x[:, 2] + rng.standard_normal(rows) > 0).astype(np.float64)
    cols = {"g": [f"k{v}" for v in g], **{f"x{j}": x[:, j] for j in range(6)}, "y": y}
    pq.write_table(pa.table(cols), path)


def start(*args):
    return subprocess.Popen(
        [str(binary_path()), *map(str, args)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )


def interrupt(proc, sig, after: float):
    """Sends `sig` after `after` seconds; returns (exit code, stderr, seconds to exit)."""
    time.sleep(after)
    assert proc.poll() is None, "the run ended before it could be interrupted"
    t0 = time.monotonic()
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=10)
    return proc.returncode, err, time.monotonic() - t0


TRAIN = ["--by", "g", "--target", "y", "--model", "gbdt", "--param", "rounds=3000", "--param", "early_stopping_rounds=0"]


@pytest.mark.parametrize("sig,code,name", [(signal.SIGINT, 130, "SIGINT"), (signal.SIGTERM, 143, "SIGTERM")])
def test_train_interrupted_stops_at_once_and_keeps_the_old_output(tmp_path, sig, code, name):
    data = tmp_path / "d.parquet"
    slow_data(data, 60_000)
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    out = out_dir / "m.gfm"
    out.write_bytes(b"an earlier model")
    proc = start("train", "--data", data, "--out", out, *TRAIN)
    rc, err, took = interrupt(proc, sig, 1.5)
    assert rc == code
    assert err.splitlines() == [f"error: interrupted by {name}; no output was written"]
    assert took < 1.0
    assert sorted(p.name for p in out_dir.iterdir()) == ["m.gfm"]
    assert out.read_bytes() == b"an earlier model"


def test_predict_interrupted_removes_its_temporary_file(tmp_path):
    # A slow model (many trees) over enough rows that the output is being
    # written, batch by batch, when the signal comes.
    data = tmp_path / "d.parquet"
    slow_data(data, 20_000)
    model = tmp_path / "m.gfm"
    subprocess.run(
        [str(binary_path()), "train", "--data", data, "--out", model, "--by", "g", "--target", "y", "--model", "gbdt",
         "--param", "rounds=400", "--param", "early_stopping_rounds=0", "--param", "num_leaves=63"],
        check=True, capture_output=True,
    )
    big = tmp_path / "big.parquet"
    slow_data(big, 1_500_000, seed=1)
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    out = out_dir / "p.parquet"
    proc = start("predict", "--model", model, "--data", big, "--out", out)
    deadline = time.monotonic() + 20
    while not any(p.name.startswith(".p.parquet.tmp-") for p in out_dir.iterdir()):
        assert proc.poll() is None and time.monotonic() < deadline, "predict never started writing"
        time.sleep(0.02)
    rc, err, took = interrupt(proc, signal.SIGTERM, 0.2)
    assert rc == 143 and err.splitlines() == ["error: interrupted by SIGTERM; no output was written"]
    assert took < 1.0
    assert list(out_dir.iterdir()) == []


def test_a_killed_runs_leftover_is_removed_an_hour_later(tmp_path):
    data = tmp_path / "d.parquet"
    slow_data(data, 60_000)
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    out = out_dir / "m.gfm"
    # A leftover named as a killed run leaves one: kept while it may be a
    # live run's, removed once an hour old.
    left = out_dir / ".m.gfm.tmp-999999"
    left.write_bytes(b"partial")
    proc = start("train", "--data", data, "--out", out, "--by", "g", "--target", "y")
    proc.communicate(timeout=120)
    assert proc.returncode == 0 and left.exists()
    two_hours_ago = time.time() - 7200
    os.utime(left, (two_hours_ago, two_hours_ago))
    proc = start("train", "--data", data, "--out", out, "--by", "g", "--target", "y")
    proc.communicate(timeout=120)
    assert proc.returncode == 0
    assert sorted(p.name for p in out_dir.iterdir()) == ["m.gfm"]


def test_two_writers_leave_one_complete_model(tmp_path):
    # Two runs writing the same --out at once: each writes its own
    # temporary file and renames it, so the file is one run's, whole.
    import groupfit as gf

    data = tmp_path / "d.parquet"
    slow_data(data, 60_000)
    args = [["--param", "C=0.001"], ["--param", "C=100"]]
    alone = []
    for i, a in enumerate(args):
        p = start("train", "--data", data, "--out", tmp_path / f"alone{i}.gfm", "--by", "g", "--target", "y", *a)
        p.communicate(timeout=120)
        alone.append(gf.load(str(tmp_path / f"alone{i}.gfm")).predict(str(data)))
    assert not np.allclose(alone[0], alone[1])
    out = tmp_path / "m.gfm"
    runs = [start("train", "--data", data, "--out", out, "--by", "g", "--target", "y", *a) for a in args]
    for p in runs:
        p.communicate(timeout=120)
        assert p.returncode == 0
    got = gf.load(str(out)).predict(str(data))
    # one run's model (up to summation order: the runs shared the cores)
    assert any(np.allclose(got, a, rtol=1e-9, atol=1e-12) for a in alone)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["alone0.gfm", "alone1.gfm", "d.parquet", "m.gfm"]
