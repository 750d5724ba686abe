"""Streaming prediction: `groupfit predict` and `GroupedModel.predict_batches`
read the input 65,536 rows at a time and write or yield each batch once
predicted. The output equals the whole-table prediction, in row order, and
an error in a late batch leaves no output file."""

import gzip

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import pytest

import groupfit as gf_py
from groupfit import exceptions as gfe
from conftest import assert_cli_error, assert_no_output

STREAM = 65_536
ROWS = 150_000  # three batches: 65,536 + 65,536 + 18,928


def table(seed: int, rows: int, groups: int = 40) -> pa.Table:
    rng = np.random.default_rng(seed)
    g = rng.integers(0, groups, rows)
    x = rng.standard_normal((rows, 3))
    z = x @ np.array([1.0, -0.5, 0.25]) + 0.1 * g
    y = (rng.random(rows) < 1 / (1 + np.exp(-z))).astype(np.float64)
    return pa.table({"g": [f"s{v:03d}" for v in g], "x0": x[:, 0], "x1": x[:, 1], "x2": x[:, 2], "y": y})


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    d = tmp_path_factory.mktemp("stream")
    train = table(1, 20_000)
    model = gf_py.fit(train, by="g", target="y")
    path = d / "m.gfm"
    model.save(str(path))
    data = table(2, ROWS)
    data_path = d / "data.parquet"
    pq.write_table(data, data_path, row_group_size=40_000)
    return model, path, data, data_path


def test_cli_predict_streams_in_row_order(gf, tmp_path, trained):
    model, model_path, data, data_path = trained
    whole = model.predict_table(data)
    out = tmp_path / "p.parquet"
    report = gf.predict(model_path, data_path, out)
    assert report["rows"] == ROWS and report["own"] + report["global"] == ROWS
    got = pq.read_table(out)
    assert got.column("g").equals(data.column("g"))
    np.testing.assert_array_equal(got.column("prediction").to_numpy(), whole.column("prediction").to_numpy())
    # CSV and gzip-compressed CSV outputs: one header, every row, the same values
    for name in ("p.csv", "p.csv.gz"):
        gf.ok("predict", "--model", model_path, "--data", data_path, "--out", tmp_path / name, "--with-route")
        opener = gzip.open if name.endswith(".gz") else open
        with opener(tmp_path / name, "rt") as f:
            lines = f.read().splitlines()
        assert lines[0] == "g,prediction,route" and len(lines) == ROWS + 1
        csv = pacsv.read_csv(tmp_path / name)
        np.testing.assert_allclose(csv.column("prediction").to_numpy(), whole.column("prediction").to_numpy(), rtol=1e-15)
        assert csv.column("route").to_pylist() == whole.column("route").to_pylist()


def test_a_csv_input_streams_too(gf, tmp_path, trained):
    model, model_path, data, _ = trained
    src = tmp_path / "data.csv"
    pacsv.write_csv(data, src)
    out = tmp_path / "p.parquet"
    assert gf.predict(model_path, src, out)["rows"] == ROWS
    got = pq.read_table(out)
    np.testing.assert_allclose(got.column("prediction").to_numpy(), model.predict(data), rtol=1e-12)


def test_predict_batches_yields_bounded_batches_in_row_order(trained):
    model, _, data, data_path = trained
    whole = model.predict_table(data)
    inputs = {
        "path": data_path,
        "reader": pa.RecordBatchReader.from_batches(data.schema, data.to_batches(max_chunksize=50_000)),
        "table": data,
        "iterable": [data.slice(0, 70_000), data.slice(70_000)],
        "pandas": data.to_pandas(),
    }
    for name, src in inputs.items():
        batches = list(model.predict_batches(src))
        assert all(0 < b.num_rows <= STREAM for b in batches), name
        got = pa.Table.from_batches(batches)
        assert got.num_rows == ROWS, name
        assert got.column_names == ["g", "prediction", "route"], name
        np.testing.assert_array_equal(got.column("prediction").to_numpy(), whole.column("prediction").to_numpy())
    assert [b.num_rows for b in model.predict_batches(data_path)] == [STREAM, STREAM, ROWS - 2 * STREAM]
    plain = next(model.predict_batches(data_path, with_route=False))
    assert plain.schema.names == ["g", "prediction"]
    with pytest.raises(TypeError, match="expected record batches or tables, got int"):
        list(model.predict_batches([1, 2]))


def test_an_error_in_a_late_batch_leaves_no_output(gf, tmp_path):
    # Without a global model, a group unseen in training has no model. Its
    # only row is in the third batch: the first two were predicted (and
    # written to the temporary file) before the error.
    train = table(3, 20_000)
    model = gf_py.fit(train, by="g", target="y", global_model=False)
    model_path = tmp_path / "m.gfm"
    model.save(str(model_path))
    data = table(4, ROWS)
    keys = data.column("g").to_pylist()
    keys[140_000] = "unseen"
    data = data.set_column(0, "g", pa.array(keys))
    src = tmp_path / "data.parquet"
    pq.write_table(data, src)
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    rc, _, err = gf.run("predict", "--model", model_path, "--data", src, "--out", out_dir / "p.parquet")
    assert_cli_error(rc, err, "unseen")
    assert_no_output(out_dir / "p.parquet")
    # an existing output file is left as it was
    (out_dir / "p.parquet").write_bytes(b"earlier")
    rc, _, err = gf.run("predict", "--model", model_path, "--data", src, "--out", out_dir / "p.parquet")
    assert rc == 1 and (out_dir / "p.parquet").read_bytes() == b"earlier"
    batches = model.predict_batches(str(src))
    assert next(batches).num_rows == STREAM and next(batches).num_rows == STREAM
    with pytest.raises(gfe.NoModelError, match="unseen"):
        next(batches)
