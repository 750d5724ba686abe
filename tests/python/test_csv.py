"""CSV input and output: `train`, `predict` and `explain` read `.csv` and `.csv.gz`
(a header row, the types inferred) as they read Parquet, `predict --out X.csv`
writes CSV, and a ragged or unreadable line is one error naming the file and line."""

import gzip
import json

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv
import pytest

from conftest import assert_cli_error, assert_no_output, make_grouped

# Fixed strategy and threads: two runs compute bit-identical models.
FIXED = ["--strategy", "tp", "--threads", "2"]


def as_float64(cols: dict) -> dict:
    """The features as float64: a CSV file holds their decimal text, read back as float64."""
    return {k: (np.asarray(v, dtype=np.float64) if k.startswith("f") else v) for k, v in cols.items()}


def write_csv(path, cols: dict):
    """Writes columns as CSV with pyarrow (header row; floats round-trip exactly)."""
    pacsv.write_csv(pa.table(cols), path)
    return path


def write_csv_gz(path, cols: dict):
    buf = pa.BufferOutputStream()
    pacsv.write_csv(pa.table(cols), buf)
    path.write_bytes(gzip.compress(buf.getvalue().to_pybytes()))
    return path


@pytest.fixture
def data(gf, tmp_path):
    """The same training and validation rows as Parquet, CSV and CSV.gz; the
    validation file has missing features (empty CSV fields) and an unseen group."""
    cols, _ = make_grouped(seed=3, sizes={"a": 300, "b": 200, "c": 120, "d": 6}, d=3, task="binary")
    vcols, _ = make_grouped(seed=4, sizes={"a": 80, "b": 60, "c": 40, "zz": 20}, d=3, task="binary")
    cols, vcols = as_float64(cols), as_float64(vcols)
    vcols["f1"] = np.where(np.arange(len(vcols["y"])) % 11 == 0, np.nan, vcols["f1"])
    vcols["f1"] = pa.array(vcols["f1"], from_pandas=True)  # NaN -> null: an empty field
    d = tmp_path / "data"
    d.mkdir()
    files = {
        "parquet": (gf.write_parquet(d / "train.parquet", cols), gf.write_parquet(d / "valid.parquet", vcols)),
        "csv": (write_csv(d / "train.csv", cols), write_csv(d / "valid.csv", vcols)),
        "csv.gz": (write_csv_gz(d / "train.csv.gz", cols), write_csv_gz(d / "valid.csv.gz", vcols)),
    }
    return files, cols, vcols


def models_of(gf, model_path) -> dict:
    """What a model file holds, without the timings, the memory (CSV columns
    are held as read, Parquet ones are read after the estimate) and the
    command (it names the files)."""
    ins = gf.inspect(model_path)
    summary = ins.pop("summary")
    for k in ("load_s", "train_s", "wall_s", "passes_s", "memory", "command"):
        summary.pop(k)
    for g in ins["groups"]:
        g.pop("train_s", None)
    return {**ins, "summary": summary}


@pytest.mark.parametrize("model", ["linear", "gbdt"])
def test_train_on_csv_equals_train_on_parquet(gf, data, tmp_path, model):
    files, _, _ = data
    grid = ["--param", "C=0.1,1"] if model == "linear" else ["--param", "rounds=5"]
    got = {}
    for kind, (train, valid) in files.items():
        out = tmp_path / f"{kind}.gfm"
        gf.train(train, out, "g", "y", "--valid", valid, "--model", model, *grid, *FIXED)
        got[kind] = models_of(gf, out)
    assert got["parquet"]["groups"], "no groups trained"
    assert got["csv"] == got["parquet"]
    assert got["csv.gz"] == got["parquet"]


def test_held_out_rows_are_the_same_from_csv(gf, data, tmp_path):
    files, _, _ = data
    for kind in ("parquet", "csv"):
        gf.train(files[kind][0], tmp_path / f"{kind}.gfm", "g", "y", *FIXED)
    assert models_of(gf, tmp_path / "csv.gfm") == models_of(gf, tmp_path / "parquet.gfm")


def test_predict_reads_csv_and_writes_csv(gf, data, tmp_path):
    files, _, vcols = data
    model = tmp_path / "m.gfm"
    gf.train(files["parquet"][0], model, "g", "y", *FIXED)
    ref = tmp_path / "ref.parquet"
    report = gf.predict(model, files["parquet"][1], ref)
    assert report["rows"] == len(vcols["y"]) and report["unseen"] == 20
    want = gf.read_parquet(ref)
    for kind in ("csv", "csv.gz"):
        out = tmp_path / f"p-{kind}.parquet"
        assert gf.predict(model, files[kind][1], out) == report
        assert gf.read_parquet(out).equals(want)
    for name in ("p.csv", "p.csv.gz"):
        out = tmp_path / name
        assert gf.predict(model, files["csv"][1], out) == report
        raw = out.read_bytes()
        text = (gzip.decompress(raw) if name.endswith(".gz") else raw).decode()
        assert text.splitlines()[0] == "g,prediction"
        got = pacsv.read_csv(pa.BufferReader(text.encode()))
        assert got.column_names == ["g", "prediction"]
        assert got.column("g").to_pylist() == vcols["g"]
        # Predictions are written so that they read back exactly.
        np.testing.assert_array_equal(got.column("prediction").to_numpy(), want.column("prediction").to_numpy())
    # --with-route adds the route column.
    out = tmp_path / "r.csv"
    gf.ok("predict", "--model", model, "--data", files["csv"][1], "--out", out, "--with-route")
    got = pacsv.read_csv(out)
    assert got.column_names == ["g", "prediction", "route"]
    assert got.column("route").to_pylist().count("unseen") == 20


def test_readable_summary_notes_csv(gf, data, tmp_path):
    files, _, _ = data
    rc, stdout, stderr = gf.run("train", "--data", files["csv"][0], "--by", "g", "--target", "y",
                                "--out", tmp_path / "m.gfm")
    assert rc == 0 and stdout == "", stderr
    assert "read CSV, types inferred (Parquet reads faster)" in stderr.splitlines()
    rc, _, stderr = gf.run("train", "--data", files["parquet"][0], "--by", "g", "--target", "y",
                           "--out", tmp_path / "m2.gfm")
    assert rc == 0 and "CSV" not in stderr


def test_explain_reads_csv(gf, data, tmp_path, monkeypatch):
    monkeypatch.setenv("GROUPFIT_CACHE_DIR", str(tmp_path / "cache"))
    files, cols, _ = data
    out = gf.ok("explain", "--data", files["csv.gz"][0], "--by", "g", "--target", "y", "--json")
    e = json.loads(out)
    assert e["groups"] == 4 and e["features"] == 3


def test_types_are_inferred(gf, tmp_path):
    """Integer keys, a feature with integers first and a decimal late, and empty
    fields as missing values."""
    rng = np.random.default_rng(0)
    n = 600
    lines = ["id,x,y"]
    for i in range(n):
        x = str(int(rng.integers(-5, 5))) if i < n - 1 else "0.5"
        if i % 50 == 7:
            x = ""  # missing: imputed
        lines.append(f"{i % 3},{x},{int(rng.random() < 0.5)}")
    path = tmp_path / "t.csv"
    path.write_text("\n".join(lines) + "\n")
    s = gf.train(path, tmp_path / "m.gfm", "id", "y")
    assert s["features"] == ["x"] and s["groups"] == 3 and s["task"] == "binary"
    ins = gf.inspect(tmp_path / "m.gfm")
    assert sorted(g["key"] for g in ins["groups"]) == ["0", "1", "2"]


# ---------------------------------------------------------------- errors


def csv_text(n=60, ragged_at=None):
    lines = ["g,f0,f1,y"]
    for i in range(n):
        lines.append(f"{'ab'[i % 2]},{i * 0.5},{-i},{i % 2}")
    if ragged_at is not None:
        lines[ragged_at - 1] = "a,1.5,0"  # 1-based line, the header is line 1
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("gz", [False, True])
def test_ragged_line_is_one_error_naming_file_and_line(gf, tmp_path, gz):
    data = tmp_path / ("bad.csv.gz" if gz else "bad.csv")
    text = csv_text(ragged_at=42).encode()
    data.write_bytes(gzip.compress(text) if gz else text)
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    out = out_dir / "m.gfm"
    rc, stdout, stderr = gf.run("train", "--data", data, "--by", "g", "--target", "y", "--out", out)
    line = assert_cli_error(rc, stderr, str(data), "line 42", "3 fields, but the header has 4")
    assert line == f"error: '{data}' is not readable CSV at line 42: 3 fields, but the header has 4"
    assert stdout == ""
    assert_no_output(out)


def test_predict_errors_leave_no_output(gf, tmp_path):
    good = tmp_path / "good.csv"
    good.write_text(csv_text())
    model = tmp_path / "m.gfm"
    gf.train(good, model, "g", "y")
    bad = tmp_path / "bad.csv"
    bad.write_bytes(b"g,f0,f1\na,1,2\nb,\xff,3\n")
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    for out in (out_dir / "p.csv", out_dir / "p.parquet"):
        rc, stdout, stderr = gf.run("predict", "--model", model, "--data", bad, "--out", out)
        assert_cli_error(rc, stderr, str(bad), "line 3", "not valid UTF-8")
        assert_no_output(out)
    # A valid CSV file without a needed column: the usual missing-column error.
    nocol = tmp_path / "nocol.csv"
    nocol.write_text("g,f0\na,1\n")
    rc, _, stderr = gf.run("predict", "--model", model, "--data", nocol, "--out", out_dir / "p.csv")
    assert_cli_error(rc, stderr, "column 'f1' not found", str(nocol))
    assert_no_output(out_dir / "p.csv")


def test_text_in_a_numeric_csv_column_makes_it_categorical_and_says_so(gf, tmp_path):
    # One word among numbers makes the column text, so categorical; the
    # summary's account of the columns is where the user sees it.
    text = csv_text().replace("\na,3.0,", "\na,three,", 1)
    data = tmp_path / "t.csv"
    data.write_text(text)
    s = gf.train(data, tmp_path / "m.gfm", "g", "y", "--features", "f0,f1")
    assert "f0" in s["categorical"] and "f1" not in s["categorical"]


def test_empty_csv_file(gf, tmp_path):
    data = tmp_path / "e.csv"
    data.write_text("")
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    rc, _, stderr = gf.run("train", "--data", data, "--by", "g", "--target", "y", "--out", out_dir / "m.gfm")
    assert_cli_error(rc, stderr, str(data), "line 1", "header")
    header_only = tmp_path / "h.csv"
    header_only.write_text("g,f0,y\n")
    rc, _, stderr = gf.run("train", "--data", header_only, "--by", "g", "--target", "y",
                           "--out", out_dir / "m.gfm")
    assert_cli_error(rc, stderr, str(header_only), "no usable rows")
    assert_no_output(out_dir / "m.gfm")


# ---------------------------------------------------------------- Python API


def test_python_fit_and_predict_take_csv_paths(data):
    gfp = pytest.importorskip("groupfit")
    files, _, _ = data
    from_parquet = gfp.fit(str(files["parquet"][0]), by="g", target="y", valid=str(files["parquet"][1]),
                           strategy="tp", threads=2)
    from_csv = gfp.fit(str(files["csv"][0]), by="g", target="y", valid=files["csv.gz"][1],
                       strategy="tp", threads=2)
    assert from_csv.to_bytes() != b""
    np.testing.assert_array_equal(from_csv.predict(str(files["csv"][1])),
                                  from_parquet.predict(str(files["parquet"][1])))
    # A CSV training path with an in-memory validation table.
    valid_table = pacsv.read_csv(files["csv"][1])
    mixed = gfp.fit(files["csv"][0], by="g", target="y", valid=valid_table, strategy="tp", threads=2)
    assert mixed.summary["groups"] == from_csv.summary["groups"]


def test_python_csv_error_is_a_file_error(tmp_path):
    gfp = pytest.importorskip("groupfit")
    from groupfit import exceptions as gfe

    bad = tmp_path / "bad.csv"
    bad.write_text(csv_text(ragged_at=5))
    with pytest.raises(gfe.FileError, match=r"bad\.csv' is not readable CSV at line 5"):
        gfp.fit(bad, by="g", target="y")
