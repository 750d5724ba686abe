"""`GROUPFIT_SIMD` caps the kernels' SIMD level, and the level never changes
the answer: gbdt's trees are the same at every level, bit for bit; linear
and mlp fuse multiply-adds and sum in their level's lanes, so they agree to
rounding (docs/cli.md, "Environment variables")."""

import os
import subprocess

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from conftest import binary_path

LEVELS = ["scalar", "avx2", None]  # None: the widest level the CPU has
ARGS = {
    "gbdt": ["--param", "rounds=20"],
    "linear": [],
    "mlp": ["--param", "epochs=5", "--param", "hidden=8"],
}


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    rng = np.random.default_rng(7)
    n, d = 6_000, 6
    x = rng.standard_normal((n, d)).astype(np.float32)
    g = rng.integers(0, 6, n)
    y = (x[:, 0] - 0.5 * x[:, 1] + 0.3 * g + rng.standard_normal(n) > 0).astype(np.float64)
    path = tmp_path_factory.mktemp("simd") / "d.parquet"
    pq.write_table(pa.table({"g": g, **{f"x{j}": x[:, j] for j in range(d)}, "y": y}), path)
    return path


def environment(level):
    env = {k: v for k, v in os.environ.items() if k not in ("GROUPFIT_SIMD", "GROUPFIT_TRACE")}
    if level:
        env["GROUPFIT_SIMD"] = level
    return env


def predictions(data, tmp_path, model, level):
    env = environment(level)
    out = tmp_path / f"{model}-{level}.gfm"
    preds = tmp_path / f"{model}-{level}.parquet"
    for args in (["train", "--data", data, "--by", "g", "--target", "y", "--model", model,
                  *ARGS[model], "--out", out],
                 ["predict", "--model", out, "--data", data, "--out", preds]):
        p = subprocess.run([str(binary_path()), *map(str, args)], capture_output=True, text=True,
                           env=env, timeout=120)
        assert p.returncode == 0, p.stderr
    return pq.read_table(preds)["prediction"].to_numpy()


@pytest.mark.parametrize("model", sorted(ARGS))
def test_the_simd_level_does_not_change_the_answer(data, tmp_path, model):
    got = [predictions(data, tmp_path, model, level) for level in LEVELS]
    for level, p in zip(LEVELS[1:], got[1:]):
        if model == "gbdt":
            np.testing.assert_array_equal(p, got[0], err_msg=f"{model} at {level}")
        else:
            np.testing.assert_allclose(p, got[0], rtol=1e-5, atol=1e-7, err_msg=f"{model} at {level}")


def train_trace(data, tmp_path, level):
    env = {**environment(level), "GROUPFIT_TRACE": "1"}
    return subprocess.run([str(binary_path()), "train", "--data", str(data), "--by", "g", "--target", "y",
                           "--out", str(tmp_path / "m.gfm")], capture_output=True, text=True, env=env,
                          timeout=120)


def test_the_cap_is_the_level_the_kernels_run_at(data, tmp_path):
    for level in ("scalar", "avx2"):
        p = train_trace(data, tmp_path, level)
        assert p.returncode == 0, p.stderr
        # the CPU may have less than the cap (avx2 on a scalar CPU runs scalar)
        ran = [line for line in p.stderr.splitlines() if line.startswith("[groupfit] simd: ")]
        assert ran and ran[0].split(": ")[1] in ("scalar", level), p.stderr
    p = train_trace(data, tmp_path, "scalar")
    assert "[groupfit] simd: scalar" in p.stderr


def test_an_unknown_level_is_one_clear_line(data, tmp_path):
    p = train_trace(data, tmp_path, "sse9")
    assert p.returncode == 1
    lines = [line for line in p.stderr.splitlines() if not line.startswith("[groupfit]")]
    assert lines == ["error: GROUPFIT_SIMD='sse9' names no SIMD level (scalar, avx2, avx512, avx512vbmi2)"]
    assert not (tmp_path / "m.gfm").exists()
