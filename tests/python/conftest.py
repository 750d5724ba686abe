"""Shared helpers for the tests that drive the `groupfit` command-line binary.

The binary is taken from the environment variable GROUPFIT_BIN, or else from
<repo>/target/release/groupfit (or $CARGO_TARGET_DIR/release/groupfit when that
is set); build it with `cargo build --release`.

Fixtures:
  gf        -- a `GF` object: run / train / predict / inspect / parquet helpers.
  gf_bin    -- the path of the binary.

Tests never touch anything outside their own temporary directories.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

REPO = Path(__file__).resolve().parents[2]
DEFAULT_BIN = Path(os.environ.get("CARGO_TARGET_DIR") or REPO / "target") / "release" / "groupfit"

# Solver settings that make the engine converge far below the test tolerances.
TIGHT = ["--param", "tol=1e-10", "--param", "max_iter=200"]


def binary_path() -> Path:
    return Path(os.environ.get("GROUPFIT_BIN", str(DEFAULT_BIN)))


def run(*args, timeout: float = 120) -> tuple[int, str, str]:
    """Runs the binary with `args` (converted to str); returns (returncode, stdout, stderr)."""
    exe = binary_path()
    proc = subprocess.run(
        [str(exe), *[str(a) for a in args]],
        capture_output=True,
        text=True,
        timeout=timeout,
        # No terminal: the progress bar stays off; keep the environment minimal and stable.
        env={**os.environ, "GROUPFIT_TRACE": ""},
    )
    return proc.returncode, proc.stdout, proc.stderr


def write_parquet(path: Path, columns: dict | pa.Table) -> Path:
    """Writes a dict of column name -> array/list (or a pyarrow Table) as Parquet."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    table = columns if isinstance(columns, pa.Table) else pa.table(columns)
    pq.write_table(table, path)
    return path


def read_parquet(path: Path) -> pa.Table:
    return pq.read_table(path)


def sigmoid(z: np.ndarray) -> np.ndarray:
    z = np.asarray(z, dtype=np.float64)
    out = np.empty_like(z)
    pos = z >= 0
    out[pos] = 1.0 / (1.0 + np.exp(-z[pos]))
    e = np.exp(z[~pos])
    out[~pos] = e / (1.0 + e)
    return out


class CliFailure(AssertionError):
    pass


class GF:
    """Thin wrappers around the three subcommands."""

    run = staticmethod(run)
    write_parquet = staticmethod(write_parquet)
    read_parquet = staticmethod(read_parquet)

    def ok(self, *args) -> str:
        """Runs and asserts success; returns stdout."""
        rc, out, err = run(*args)
        if rc != 0:
            raise CliFailure(f"groupfit {' '.join(map(str, args))} failed with {rc}:\n{err}")
        return out

    def train(self, data, out, by="g", target="y", *extra) -> dict:
        """`train --json`; returns the summary."""
        by = by if isinstance(by, str) else ",".join(by)
        stdout = self.ok("train", "--data", data, "--by", by, "--target", target, "--out", out, "--json", *extra)
        lines = [ln for ln in stdout.splitlines() if ln.strip()]
        assert len(lines) == 1, f"train --json printed {len(lines)} lines on stdout:\n{stdout}"
        return json.loads(lines[0])

    def inspect(self, model) -> dict:
        return json.loads(self.ok("inspect", model, "--json", "--top", "0"))

    def predict(self, model, data, out) -> dict:
        stdout = self.ok("predict", "--model", model, "--data", data, "--out", out, "--json")
        return json.loads(stdout)

    @staticmethod
    def groups_by_key(inspected: dict) -> dict:
        """inspect --json groups indexed by their displayed key."""
        groups = {g["key"]: g for g in inspected["groups"]}
        assert len(groups) == len(inspected["groups"]), "duplicate group keys in inspect output"
        return groups

    @staticmethod
    def coef(entry: dict) -> tuple[np.ndarray, float]:
        """(coef, intercept) of a group or global entry of inspect --json."""
        m = entry["model"]
        assert m["family"] == "linear"
        return np.asarray(m["coef"], dtype=np.float64), float(m["intercept"])


@pytest.fixture(scope="session")
def gf_bin() -> Path:
    exe = binary_path()
    if not exe.is_file() or not os.access(exe, os.X_OK):
        pytest.fail(
            f"groupfit binary not found at {exe}; run `cargo build --release` or set GROUPFIT_BIN",
            pytrace=False,
        )
    return exe


@pytest.fixture(scope="session")
def gf(gf_bin) -> GF:
    return GF()


def assert_cli_error(rc: int, stderr: str, *must_contain: str) -> str:
    """A failed run: exit code 1 and exactly one stderr line `error: ...` containing every string."""
    assert rc == 1, f"expected exit code 1, got {rc}; stderr:\n{stderr}"
    lines = stderr.splitlines()
    assert len(lines) == 1, f"expected one stderr line, got {len(lines)}:\n{stderr}"
    line = lines[0]
    assert line.startswith("error: "), line
    for s in must_contain:
        assert s in line, f"{s!r} not in {line!r}"
    return line


def assert_no_output(out_path: Path) -> None:
    """Neither the output file nor any temporary file is left in its directory."""
    out_path = Path(out_path)
    assert not out_path.exists(), f"{out_path} was written although the command failed"
    leftovers = sorted(p.name for p in out_path.parent.iterdir())
    assert leftovers == [], f"files left in the output directory: {leftovers}"


def make_grouped(
    seed: int,
    sizes: dict,
    d: int = 5,
    task: str = "binary",
    noise: float = 0.5,
) -> tuple[dict, np.ndarray]:
    """Synthetic grouped data: float32 standard-normal features f0..f{d-1}, key column `g`
    (the dict keys of `sizes`, rows shuffled), target `y`; each group has its own true
    weights and intercept. Returns (columns, true weights per group in `sizes` order)."""
    rng = np.random.default_rng(seed)
    keys = list(sizes)
    true_w = rng.normal(0.0, 0.8, size=(len(keys), d + 1))
    parts_x, parts_y, parts_g = [], [], []
    for k, key in enumerate(keys):
        n = sizes[key]
        x = rng.standard_normal((n, d)).astype(np.float32)
        z = x.astype(np.float64) @ true_w[k, :d] + true_w[k, d]
        if task == "binary":
            y = (rng.random(n) < sigmoid(z)).astype(np.float64)
        else:
            y = z + noise * rng.standard_normal(n)
        parts_x.append(x)
        parts_y.append(y)
        parts_g.extend([key] * n)
    x = np.concatenate(parts_x)
    y = np.concatenate(parts_y)
    g = np.asarray(parts_g, dtype=object)
    order = rng.permutation(len(y))
    cols = {"g": g[order].tolist()}
    for j in range(d):
        cols[f"f{j}"] = x[order, j]
    cols["y"] = y[order]
    return cols, true_w


def features_of(cols: dict, d: int | None = None) -> np.ndarray:
    """The f0..f{d-1} columns as a float64 matrix (the values the engine sees)."""
    names = [k for k in cols if k.startswith("f") and k[1:].isdigit()]
    names.sort(key=lambda s: int(s[1:]))
    if d is not None:
        names = names[:d]
    return np.column_stack([np.asarray(cols[n], dtype=np.float64) for n in names])
