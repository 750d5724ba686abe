"""Progress: the CLI's bar under a pseudo-terminal and without one, and
Python's callback, bar and ``progress=False`` (issue 38)."""

from __future__ import annotations

import os
import pty
import re
import select
import subprocess
import sys
import time

import numpy as np
import pytest

import groupfit
from conftest import binary_path, make_grouped, write_parquet

#: A job of each family that trains for a few seconds on 2 cores.
JOBS = {
    "gbdt": ["--model", "gbdt", "--param", "rounds=250", "--param", "num_leaves=31,15"],
    "mlp": ["--model", "mlp", "--param", "hidden=64", "--param", "epochs=300", "--param", "lr=0.01,0.001"],
    "linear": ["--model", "linear", "--param", "C=0.01,0.1,1,10"],
}


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    """120,000 rows in 60 groups of Zipf-like sizes, 8 features."""
    rng = np.random.default_rng(38)
    sizes = {f"g{i}": int(6000 / (i + 1) ** 0.8) + 200 for i in range(60)}
    cols, _ = make_grouped(38, sizes, d=8)
    del rng
    return write_parquet(tmp_path_factory.mktemp("progress") / "train.parquet", cols)


def _train_args(data, out, family):
    return [str(binary_path()), "train", "--data", str(data), "--by", "g", "--target", "y",
            "--out", str(out), "--threads", "2", *JOBS[family]]


def _run_in_pty(args, timeout=300.0):
    """Runs ``args`` with stderr (and stdout) on a pseudo-terminal; returns
    the exit code and everything written to it."""
    master, slave = pty.openpty()
    proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=slave, stderr=slave, close_fds=True)
    os.close(slave)
    chunks = []
    deadline = time.monotonic() + timeout
    while True:
        ready, _, _ = select.select([master], [], [], 0.5)
        if ready:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # EIO: the child closed the terminal
                break
            if not chunk:
                break
            chunks.append(chunk)
        elif proc.poll() is not None:
            break
        assert time.monotonic() < deadline, "timed out"
    rc = proc.wait()
    os.close(master)
    return rc, b"".join(chunks).decode("utf-8", "replace")


@pytest.mark.parametrize("family", ["gbdt", "mlp"])
def test_the_bar_advances_on_a_terminal(data, tmp_path, family):
    rc, text = _run_in_pty(_train_args(data, tmp_path / "m.gfm", family))
    assert rc == 0, text
    # Each draw shows the stage, a bar and a percentage.
    draws = re.findall(r"training \[[=> ]{30}\]\s+(\d+)%", text)
    steps = sorted({int(p) for p in draws})
    assert len(steps) >= 5, f"{family}: the bar showed {steps}:\n{text[-2000:]}"
    assert "ETA " in text and " models" in text, text[-2000:]
    # The summary follows a cleared bar.
    assert "models" in text.splitlines()[-1] or "wrote" in text or "trained" in text


@pytest.mark.parametrize("family", ["gbdt", "linear"])
def test_no_escape_codes_without_a_terminal(data, tmp_path, family):
    args = _train_args(data, tmp_path / "m.gfm", family)
    p = subprocess.run(args, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    for s in (p.stderr, p.stdout):
        assert "\x1b" not in s and "\r" not in s, repr(s[:500])
    assert "training [" not in p.stderr


def test_json_draws_nothing_on_a_terminal(data, tmp_path):
    rc, text = _run_in_pty(_train_args(data, tmp_path / "m.gfm", "gbdt") + ["--json"])
    assert rc == 0, text
    assert "\x1b" not in text and "training [" not in text, text[:500]


def _fit(data, family, **kw):
    flags = JOBS[family]
    params = {}
    for i, a in enumerate(flags):
        if a == "--param":
            k, v = flags[i + 1].split("=")
            params[k] = [float(x) if "." in x else int(x) for x in v.split(",")]
    return groupfit.fit(str(data), by="g", target="y", model=flags[1], params=params, threads=2, **kw)


@pytest.mark.parametrize("family", ["linear", "gbdt", "mlp"])
def test_callback_events_increase_to_the_total(data, family):
    events = []
    _fit(data, family, progress=False, callback=lambda *e: events.append(e))
    stages = [e[0] for e in events]
    assert stages[0] == "reading" and "training" in stages and stages[-1] == "scoring", stages
    order = ["reading", "layout", "training", "scoring"]
    assert [order.index(s) for s in stages] == sorted(order.index(s) for s in stages), stages
    done = [e[1] for e in events]
    assert done == sorted(done), "done went back"
    assert all(t >= d for _, d, t, _ in events if t > 0)
    elapsed = [e[3] for e in events]
    assert elapsed == sorted(elapsed)
    last = events[-1]
    assert last[1] == last[2] > 0
    # The work moved in steps while training, not only at its end (linear
    # trains here in less than the 100 ms between two events).
    during = {round(100 * d / t) for s, d, t, _ in events if s == "training" and t > 0}
    if family != "linear":
        assert len(during) >= 5, (family, sorted(during))


def test_progress_false_prints_nothing(data, capfd):
    _fit(data, "gbdt", progress=False)
    out, err = capfd.readouterr()
    assert (out, err) == ("", "")


def test_progress_true_draws_a_plain_line_without_tqdm(data, capfd, monkeypatch):
    import groupfit._progress as progress

    monkeypatch.setattr(progress, "DELAY_S", 0.0)
    monkeypatch.setitem(sys.modules, "tqdm.auto", None)  # the import fails
    _fit(data, "gbdt", progress=True)
    _, err = capfd.readouterr()
    assert re.search(r"training +\d+% \d+:\d\d ETA [\d:?]+ +[\d,]+/[\d,]+ models", err), err[-500:]
    assert "\x1b" not in err


def test_progress_true_uses_tqdm_when_installed(data, capfd):
    pytest.importorskip("tqdm")
    _fit(data, "gbdt", progress=True)
    _, err = capfd.readouterr()
    assert re.search(r"training \|.*\| +\d+%", err), err[-500:]


def test_a_callback_exception_is_raised_after_training(data):
    calls = []

    def fail(*e):
        calls.append(e)
        raise KeyError("stop")

    with pytest.raises(KeyError, match="stop"):
        _fit(data, "linear", progress=False, callback=fail)
    assert len(calls) == 1


def test_the_default_draws_nothing_when_stderr_is_not_a_terminal(data, capfd):
    _fit(data, "linear")
    _, err = capfd.readouterr()
    assert err == ""
