"""Bad inputs: every error exits 1 with one stderr line `error: ...` that names the
file, column, parameter or group at fault, and leaves no output (nor temporary) file.
Also the documented non-error edge cases (null keys, tiny groups, one-class groups)."""

import numpy as np
import pyarrow as pa
import pytest

from conftest import assert_cli_error, assert_no_output, make_grouped


@pytest.fixture
def data(gf, tmp_path):
    """A small valid binary training file: key g, features f0..f2, target y."""
    cols, _ = make_grouped(seed=1, sizes={"a": 120, "b": 150, "c": 90}, d=3, task="binary")
    return gf.write_parquet(tmp_path / "train.parquet", cols)


@pytest.fixture
def outdir(tmp_path):
    d = tmp_path / "out"
    d.mkdir()
    return d


@pytest.fixture
def model(gf, data, tmp_path):
    path = tmp_path / "model.gfm"
    gf.train(data, path)
    return path


def train_fails(gf, outdir, *args, must_contain=()):
    out = outdir / "model.gfm"
    rc, stdout, stderr = gf.run("train", *args, "--out", out)
    line = assert_cli_error(rc, stderr, *must_contain)
    assert stdout == ""
    assert_no_output(out)
    return line


def predict_fails(gf, outdir, model, data, must_contain=()):
    out = outdir / "preds.parquet"
    rc, stdout, stderr = gf.run("predict", "--model", model, "--data", data, "--out", out)
    line = assert_cli_error(rc, stderr, *must_contain)
    assert stdout == ""
    assert_no_output(out)
    return line


def base_cols(n=200, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, 3))
    return {
        "g": rng.choice(["a", "b"], n).tolist(),
        "f0": x[:, 0],
        "f1": x[:, 1],
        "f2": x[:, 2],
        "y": (rng.random(n) < 1 / (1 + np.exp(-x[:, 0]))).astype(np.int64),
    }


# ---------------------------------------------------------------- files and columns


def test_missing_data_file(gf, tmp_path, outdir):
    missing = tmp_path / "no_such_file.parquet"
    train_fails(gf, outdir, "--data", missing, "--by", "g", "--target", "y", must_contain=[str(missing)])


def test_data_file_is_not_parquet(gf, tmp_path, outdir):
    bad = tmp_path / "garbage.parquet"
    bad.write_bytes(np.random.default_rng(0).bytes(5000))
    train_fails(gf, outdir, "--data", bad, "--by", "g", "--target", "y", must_contain=[str(bad), "Parquet"])


@pytest.mark.parametrize(
    "flag,value",
    [("--target", "label"), ("--by", "carrier"), ("--features", "f0,nope")],
)
def test_missing_column(gf, data, outdir, flag, value):
    args = {"--data": data, "--by": "g", "--target": "y"}
    args[flag] = value
    missing = value.split(",")[-1]
    flat = [a for kv in args.items() for a in kv]
    line = train_fails(gf, outdir, *flat, must_contain=[f"'{missing}'", str(data)])
    assert "not found" in line


def test_missing_column_in_validation_file(gf, data, tmp_path, outdir):
    cols = base_cols()
    del cols["f1"]
    valid = gf.write_parquet(tmp_path / "valid.parquet", cols)
    train_fails(gf, outdir, "--data", data, "--valid", valid, "--by", "g", "--target", "y",
                must_contain=["'f1'", str(valid)])


def test_nested_feature(gf, tmp_path, outdir):
    cols = base_cols()
    cols["tags"] = pa.array([["a"]] * len(cols["y"]))
    data = gf.write_parquet(tmp_path / "t.parquet", cols)
    line = train_fails(gf, outdir, "--data", data, "--by", "g", "--target", "y", "--features", "f0,tags",
                       must_contain=["'tags'", str(data)])
    assert "not numeric" in line


def test_date_feature_says_how_to_make_numbers_of_it(gf, tmp_path, outdir):
    cols = base_cols()
    cols["day"] = np.arange(len(cols["y"])).astype("datetime64[D]")
    data = gf.write_parquet(tmp_path / "t.parquet", cols)
    train_fails(gf, outdir, "--data", data, "--by", "g", "--target", "y", "--features", "f0,day",
                must_contain=["'day'", str(data), "date or time", "day of week"])


def test_too_many_categories(gf, tmp_path, outdir):
    cols = base_cols()
    cols["sku"] = ["s%d" % (i % 7) for i in range(len(cols["y"]))]
    data = gf.write_parquet(tmp_path / "t.parquet", cols)
    train_fails(gf, outdir, "--data", data, "--by", "g", "--target", "y", "--max-categories", "5",
                must_contain=["'sku'", str(data), "7 distinct values", "--max-categories (5)", "--by"])


def test_text_in_validation_where_numbers_were(gf, tmp_path, outdir):
    data = gf.write_parquet(tmp_path / "t.parquet", base_cols())
    cols = base_cols(seed=1)
    cols["f1"] = ["x"] * len(cols["y"])
    valid = gf.write_parquet(tmp_path / "v.parquet", cols)
    train_fails(gf, outdir, "--data", data, "--valid", valid, "--by", "g", "--target", "y",
                must_contain=["'f1'", str(valid), "holds text", "held numbers in training"])


def test_columns_are_accounted_for(gf, tmp_path):
    cols = base_cols()
    n = len(cols["y"])
    cols["carrier"] = pa.array(["AA" if i % 3 else None for i in range(n)])
    cols["fmt"] = pa.array(["big" if i % 2 else "small" for i in range(n)]).dictionary_encode()
    cols["store_no"] = np.arange(n) % 4
    cols["when"] = np.arange(n).astype("datetime64[s]")
    cols["empty"] = pa.array([None] * n, pa.float64())
    cols["tags"] = pa.array([["a"]] * n)
    data = gf.write_parquet(tmp_path / "t.parquet", cols)
    s = gf.train(data, tmp_path / "m.gfm", "g", "y", "--categorical", "store_no")
    assert s["features"] == ["f0", "f1", "f2", "carrier", "fmt", "store_no"]
    # null is a category of its own, but not a level of the dictionary
    assert s["categorical"] == {"carrier": 1, "fmt": 2, "store_no": 4}
    assert s["ignored"] == {"g": "a key", "when": "a date or time", "empty": "all null",
                            "tags": "a nested type"}
    rc, _, err = gf.run("train", "--data", data, "--by", "g", "--target", "y", "--out", tmp_path / "m2.gfm")
    assert rc == 0, err
    assert "4 numeric (f0, f1, f2, store_no); 2 categorical (carrier: 1 category, fmt: 2 categories)" in err, err
    assert "left out: empty: all null" in err, err


def test_non_numeric_target(gf, tmp_path, outdir):
    cols = base_cols()
    cols["y"] = ["yes" if v else "no" for v in cols["y"]]
    data = gf.write_parquet(tmp_path / "t.parquet", cols)
    train_fails(gf, outdir, "--data", data, "--by", "g", "--target", "y", must_contain=["'y'", "not numeric"])


@pytest.mark.parametrize("bad", [np.inf, -np.inf])
def test_infinite_feature(gf, tmp_path, outdir, bad):
    cols = base_cols()
    cols["f2"] = cols["f2"].copy()
    cols["f2"][37] = bad
    data = gf.write_parquet(tmp_path / "t.parquet", cols)
    line = train_fails(gf, outdir, "--data", data, "--by", "g", "--target", "y", must_contain=["'f2'", str(data)])
    assert "infinite" in line and "row 37" in line


def test_infinite_target(gf, tmp_path, outdir):
    cols = base_cols()
    cols["y"] = cols["y"].astype(np.float64)
    cols["y"][5] = np.inf
    data = gf.write_parquet(tmp_path / "t.parquet", cols)
    train_fails(gf, outdir, "--data", data, "--by", "g", "--target", "y", "--task", "regression",
                must_contain=["'y'", "infinite"])


def test_empty_input(gf, tmp_path, outdir):
    table = pa.table({
        "g": pa.array([], pa.string()),
        "f0": pa.array([], pa.float64()),
        "y": pa.array([], pa.int64()),
    })
    data = gf.write_parquet(tmp_path / "empty.parquet", table)
    line = train_fails(gf, outdir, "--data", data, "--by", "g", "--target", "y", must_contain=[str(data)])
    assert "no usable rows" in line


def test_all_targets_missing(gf, tmp_path, outdir):
    cols = base_cols(n=30)
    cols["y"] = pa.array([None] * 30, pa.float64())
    data = gf.write_parquet(tmp_path / "t.parquet", cols)
    line = train_fails(gf, outdir, "--data", data, "--by", "g", "--target", "y", "--task", "regression",
                       must_contain=[str(data)])
    assert "missing target" in line


# ---------------------------------------------------------------- targets


def test_binary_target_not_0_1(gf, tmp_path, outdir):
    cols = base_cols()
    cols["y"] = cols["y"].copy()
    cols["y"][11] = 2
    data = gf.write_parquet(tmp_path / "t.parquet", cols)
    line = train_fails(gf, outdir, "--data", data, "--by", "g", "--target", "y", "--task", "binary",
                       must_contain=["'y'", str(data)])
    assert "row 11" in line and "0 or 1" in line


def test_binary_target_not_0_1_in_validation_file(gf, data, tmp_path, outdir):
    """The validation file is read after fitting: the error must still leave no output."""
    cols = base_cols()
    cols["y"] = cols["y"].astype(np.float64)
    cols["y"][3] = 0.5
    valid = gf.write_parquet(tmp_path / "valid.parquet", cols)
    train_fails(gf, outdir, "--data", data, "--valid", valid, "--by", "g", "--target", "y", "--task", "binary",
                must_contain=["'y'", str(valid), "0 or 1"])


def test_single_class_target(gf, tmp_path, outdir):
    cols = base_cols()
    cols["y"] = np.zeros(len(cols["y"]), dtype=np.int64)
    data = gf.write_parquet(tmp_path / "t.parquet", cols)
    line = train_fails(gf, outdir, "--data", data, "--by", "g", "--target", "y", "--task", "binary",
                       must_contain=["'y'", "one class"])
    assert "held out" not in line


def test_single_class_training_split_says_the_split_did_it(gf, tmp_path, outdir):
    # Both classes in the file, but the 1% left for training has one.
    cols = base_cols(n=400)
    cols["y"] = (np.arange(400) % 50 == 0).astype(np.int64)
    data = gf.write_parquet(tmp_path / "t.parquet", cols)
    train_fails(gf, outdir, "--data", data, "--by", "g", "--target", "y", "--task", "binary",
                "--valid-fraction", "0.99",
                must_contain=["'y'", "one class only (0) in its", "held out by --valid-fraction 0.99"])


def test_non_binary_target_is_inferred_as_regression(gf, tmp_path):
    cols = base_cols()
    cols["y"] = cols["y"] * 3.5
    data = gf.write_parquet(tmp_path / "t.parquet", cols)
    s = gf.train(data, tmp_path / "m.gfm")
    assert s["task"] == "regression" and s["task_inferred"] is True and "valid_rmse" in s


# ---------------------------------------------------------------- arguments


@pytest.mark.parametrize(
    "param,must",
    [
        ("alpha=1", ["'alpha'", "unknown"]),
        ("C=abc", ["'C'", "'abc'"]),
        ("C=-1", ["'C'", "positive"]),
        ("C=0", ["'C'", "positive"]),
        ("max_iter=2.5", ["'max_iter'"]),
        ("C", ["'C'", "NAME=V1"]),
        ("C=", ["'C'", "empty value"]),
        ("layers=1x2x3x4", ["'layers'", "'1x2x3x4'", "1 to 3 layers"]),
        ("optimizer=rmsprop", ["'optimizer'", "'rmsprop'", "adam or sgd"]),
    ],
)
def test_bad_param(gf, data, outdir, param, must):
    train_fails(gf, outdir, "--data", data, "--by", "g", "--target", "y", "--param", param, must_contain=must)


def test_param_given_twice(gf, data, outdir):
    train_fails(gf, outdir, "--data", data, "--by", "g", "--target", "y", "--param", "C=1", "--param", "C=2",
                must_contain=["'C'", "twice"])


@pytest.mark.parametrize("mode,must", [
    ("median", ["--shrinkage 'median'", "the modes are"]),
    ("constant:0", ["--shrinkage 'constant:0'", "(0, 1]"]),
    ("min_n_obs:-3", ["--shrinkage 'min_n_obs:-3'", "at least 1"]),
    ("equal:2", ["--shrinkage 'equal:2'", "takes no value"]),
])
def test_bad_shrinkage(gf, data, outdir, mode, must):
    train_fails(gf, outdir, "--data", data, "--by", "g", "--target", "y", "--shrinkage", mode, must_contain=must)


def test_shrinkage_without_a_global_model(gf, data, outdir):
    train_fails(gf, outdir, "--data", data, "--by", "g", "--target", "y", "--shrinkage", "auto", "--no-global",
                must_contain=["--shrinkage", "--no-global"])


def test_bad_strategy(gf, data, outdir):
    train_fails(gf, outdir, "--data", data, "--by", "g", "--target", "y", "--strategy", "bogus",
                must_contain=["'bogus'", "strategy"])


def test_bad_task(gf, data, outdir):
    train_fails(gf, outdir, "--data", data, "--by", "g", "--target", "y", "--task", "multiclass",
                must_contain=["'multiclass'"])


def test_unknown_model_family(gf, data, outdir):
    train_fails(gf, outdir, "--data", data, "--by", "g", "--target", "y", "--model", "forest",
                must_contain=["'forest'"])


@pytest.mark.parametrize("fraction", ["1", "1.5", "-0.1"])
def test_bad_valid_fraction(gf, data, outdir, fraction):
    train_fails(gf, outdir, "--data", data, "--by", "g", "--target", "y", f"--valid-fraction={fraction}",
                must_contain=["--valid-fraction"])


def test_grid_without_validation_rows(gf, data, outdir):
    train_fails(gf, outdir, "--data", data, "--by", "g", "--target", "y", "--valid-fraction", "0",
                "--param", "C=0.1,1", must_contain=["validation"])


def test_mlp_target_beyond_float32(gf, tmp_path, outdir):
    cols = base_cols()
    cols["y"] = cols["f0"] * 1e200
    cols["y"][0] = 1.0
    data = gf.write_parquet(tmp_path / "t.parquet", cols)
    train_fails(gf, outdir, "--data", data, "--by", "g", "--target", "y", "--model", "mlp",
                must_contain=["float32", "has target", "rescale"])


def test_early_stopping_without_validation_rows(gf, data, outdir):
    train_fails(gf, outdir, "--data", data, "--by", "g", "--target", "y", "--valid-fraction", "0",
                "--model", "gbdt", "--param", "early_stopping_rounds=5",
                must_contain=["early_stopping_rounds", "validation"])


@pytest.mark.parametrize("threads", ["1025", "100000"])
def test_too_many_threads(gf, data, outdir, threads):
    train_fails(gf, outdir, "--data", data, "--by", "g", "--target", "y", "--threads", threads,
                must_contain=["--threads", "1024", threads])


def test_target_that_is_also_a_key(gf, data, outdir):
    train_fails(gf, outdir, "--data", data, "--by", "g,y", "--target", "y",
                must_contain=["'y'", "key"])


def test_min_rows_zero(gf, data, outdir):
    train_fails(gf, outdir, "--data", data, "--by", "g", "--target", "y", "--min-rows", "0",
                must_contain=["--min-rows"])


@pytest.mark.parametrize("features,culprit", [("f0,y", "y"), ("f1,f0", "f0")])
def test_feature_that_is_also_a_key_or_the_target(gf, tmp_path, outdir, features, culprit):
    cols = base_cols()
    cols["k"] = np.arange(len(cols["y"])) % 3  # a numeric key column
    data = gf.write_parquet(tmp_path / "t.parquet", cols)
    by = "k,f0" if culprit == "f0" else "k"
    train_fails(gf, outdir, "--data", data, "--by", by, "--target", "y", "--features", features,
                must_contain=[f"'{culprit}'"])


def test_output_directory_missing(gf, data, tmp_path):
    out = tmp_path / "no_such_dir" / "model.gfm"
    rc, stdout, stderr = gf.run("train", "--data", data, "--by", "g", "--target", "y", "--out", out)
    assert_cli_error(rc, stderr, str(out))
    assert not out.parent.exists()


def test_unwritable_output_is_reported_before_training(gf, data, tmp_path):
    # The output is a directory: reported at once (no training summary, no
    # temporary file left beside it).
    rc, stdout, stderr = gf.run("train", "--data", data, "--by", "g", "--target", "y", "--model", "gbdt",
                                "--out", tmp_path)
    assert_cli_error(rc, stderr, str(tmp_path), "directory")
    assert "trained" not in stderr
    assert not [p for p in tmp_path.iterdir() if ".tmp-" in p.name]


# ---------------------------------------------------------------- model files


def damaged_models(model, tmp_path):
    raw = model.read_bytes()
    truncated = tmp_path / "truncated.gfm"
    truncated.write_bytes(raw[: len(raw) // 2])
    header_only = tmp_path / "header_cut.gfm"
    header_only.write_bytes(raw[:10])
    rnd = tmp_path / "random.gfm"
    rnd.write_bytes(np.random.default_rng(5).bytes(4096))
    flipped = tmp_path / "flipped.gfm"
    b = bytearray(raw)
    b[len(b) // 2] ^= 0x20
    flipped.write_bytes(bytes(b))
    return {"truncated": truncated, "header_cut": header_only, "random": rnd, "flipped": flipped}


@pytest.mark.parametrize("kind", ["truncated", "header_cut", "random", "flipped"])
def test_damaged_model_predict(gf, model, data, tmp_path, outdir, kind):
    bad = damaged_models(model, tmp_path)[kind]
    line = predict_fails(gf, outdir, bad, data, must_contain=[str(bad)])
    assert "corrupt or truncated" in line
    if kind == "truncated":
        assert "truncated:" in line


@pytest.mark.parametrize("kind", ["truncated", "header_cut", "random", "flipped"])
def test_damaged_model_inspect(gf, model, tmp_path, kind):
    bad = damaged_models(model, tmp_path)[kind]
    for extra in ([], ["--json"]):
        rc, stdout, stderr = gf.run("inspect", bad, *extra)
        line = assert_cli_error(rc, stderr, str(bad))
        assert "corrupt or truncated" in line
        assert stdout == ""


def test_future_format_version(gf, model, data, tmp_path, outdir):
    raw = bytearray(model.read_bytes())
    raw[8:12] = (99).to_bytes(4, "little")
    newer = tmp_path / "newer.gfm"
    newer.write_bytes(bytes(raw))
    line = predict_fails(gf, outdir, newer, data, must_contain=[str(newer)])
    assert "version 99" in line


def test_missing_model_file(gf, data, tmp_path, outdir):
    missing = tmp_path / "nothing.gfm"
    predict_fails(gf, outdir, missing, data, must_contain=[str(missing)])
    rc, _, stderr = gf.run("inspect", missing)
    assert_cli_error(rc, stderr, str(missing))


# ---------------------------------------------------------------- predict inputs


def test_predict_missing_feature_column(gf, model, tmp_path, outdir):
    cols = base_cols()
    del cols["f2"]
    new = gf.write_parquet(tmp_path / "new.parquet", cols)
    predict_fails(gf, outdir, model, new, must_contain=["'f2'", str(new)])


def test_predict_missing_key_column(gf, model, tmp_path, outdir):
    cols = base_cols()
    del cols["g"]
    new = gf.write_parquet(tmp_path / "new.parquet", cols)
    predict_fails(gf, outdir, model, new, must_contain=["'g'", str(new)])


def test_predict_infinite_feature(gf, model, tmp_path, outdir):
    cols = base_cols()
    cols["f1"] = cols["f1"].copy()
    cols["f1"][9] = np.inf
    new = gf.write_parquet(tmp_path / "new.parquet", cols)
    predict_fails(gf, outdir, model, new, must_contain=["'f1'", str(new), "infinite"])


def test_predict_text_where_numbers_were(gf, model, tmp_path, outdir):
    cols = base_cols()
    cols["f0"] = ["x"] * len(cols["y"])
    new = gf.write_parquet(tmp_path / "new.parquet", cols)
    predict_fails(gf, outdir, model, new, must_contain=["'f0'", str(new), "holds text", "held numbers in training"])


def test_predict_numbers_where_text_was(gf, tmp_path, outdir):
    cols = base_cols()
    cols["carrier"] = ["AA" if i % 2 else "UA" for i in range(len(cols["y"]))]
    data = gf.write_parquet(tmp_path / "t.parquet", cols)
    model = tmp_path / "cat.gfm"
    gf.train(data, model)
    cols["carrier"] = np.arange(len(cols["y"]), dtype=np.int64)
    new = gf.write_parquet(tmp_path / "new.parquet", cols)
    predict_fails(gf, outdir, model, new,
                  must_contain=["'carrier'", str(new), "holds integers", "held text in training"])


def test_predict_missing_data_file(gf, model, tmp_path, outdir):
    missing = tmp_path / "none.parquet"
    predict_fails(gf, outdir, model, missing, must_contain=[str(missing)])


# ---------------------------------------------------------------- documented non-errors


def test_null_key_forms_its_own_group(gf, tmp_path):
    cols = base_cols(n=300, seed=3)
    g = list(cols["g"])
    for i in range(0, 300, 4):
        g[i] = None
    cols["g"] = pa.array(g, pa.string())
    data = gf.write_parquet(tmp_path / "t.parquet", cols)
    s = gf.train(data, tmp_path / "m.gfm", "g", "y", "--valid-fraction", "0")
    assert s["groups"] == 3
    ins = gf.inspect(tmp_path / "m.gfm")
    groups = gf.groups_by_key(ins)
    assert set(groups) == {"a", "b", "null"}
    assert groups["null"]["n_train"] == 75
    assert groups["null"]["route"] == "own"
    assert sum(e["n_train"] for e in groups.values()) == 300

    # Rows with a null key are served by the null group's model at predict time.
    preds = gf.predict(tmp_path / "m.gfm", data, tmp_path / "p.parquet")
    assert preds == {"rows": 300, "own": 300, "global": 0, "unseen": 0}
    out = gf.read_parquet(tmp_path / "p.parquet")
    assert out.column("g").null_count == 75
    x = np.column_stack([cols["f0"], cols["f1"], cols["f2"]])
    coef, intercept = gf.coef(groups["null"])
    is_null = np.array([v is None for v in g])
    want = 1 / (1 + np.exp(-(x[is_null] @ coef + intercept)))
    np.testing.assert_allclose(out.column("prediction").to_numpy()[is_null], want, rtol=1e-12)


def test_null_in_one_of_two_key_columns(gf, tmp_path):
    cols = base_cols(n=400, seed=4)
    cols["h"] = pa.array([None if i % 5 == 0 else ("x" if i % 2 else "y") for i in range(400)], pa.string())
    data = gf.write_parquet(tmp_path / "t.parquet", cols)
    gf.train(data, tmp_path / "m.gfm", "g,h", "y", "--valid-fraction", "0")
    keys = set(gf.groups_by_key(gf.inspect(tmp_path / "m.gfm")))
    assert keys == {"a/x", "a/y", "a/null", "b/x", "b/y", "b/null"}


def test_keys_that_would_display_alike_stay_apart(gf, tmp_path):
    # ("a/b", "c") and ("a", "b/c") both join to a/b/c; the text "null" and a
    # null key both read null: parts like these are quoted, and --json has
    # the parts themselves.
    n = 400
    cols = base_cols(n=n, seed=6)
    pairs = [("a/b", "c"), ("a", "b/c"), ("null", "x"), (None, "x")]
    cols["g"] = pa.array([pairs[i % 4][0] for i in range(n)], pa.string())
    cols["h"] = pa.array([pairs[i % 4][1] for i in range(n)], pa.string())
    data = gf.write_parquet(tmp_path / "t.parquet", cols)
    gf.train(data, tmp_path / "m.gfm", "g,h", "y", "--valid-fraction", "0")
    ins = gf.inspect(tmp_path / "m.gfm")
    assert {g["key"] for g in ins["groups"]} == {'"a/b"/c', 'a/"b/c"', '"null"/x', "null/x"}
    assert {tuple(g["key_parts"]) for g in ins["groups"]} == set(pairs)


def test_one_row_group_falls_back_to_global(gf, tmp_path):
    cols = base_cols(n=300, seed=6)
    cols["g"] = list(cols["g"])
    cols["g"][17] = "lonely"
    data = gf.write_parquet(tmp_path / "t.parquet", cols)
    s = gf.train(data, tmp_path / "m.gfm", "g", "y", "--valid-fraction", "0", "--min-rows", "10")
    assert s["groups"] == 3
    assert s["fallback"]["few_rows"] == 1 and s["fallback"]["min_rows"] == 10
    assert s["routes"]["groups_own"] == 2 and s["routes"]["groups_global"] == 1
    assert s["models"] == 3  # (2 own groups + global) x 1 config
    groups = gf.groups_by_key(gf.inspect(tmp_path / "m.gfm"))
    lonely = groups["lonely"]
    assert lonely["route"] == "global" and lonely["n_train"] == 1
    assert lonely.get("model") is None and lonely["config"] is None
    assert lonely["fallback"] and "min-rows" in lonely["fallback"]


def test_one_class_group_falls_back_to_global(gf, tmp_path):
    cols = base_cols(n=400, seed=7)
    g = np.array(cols["g"], dtype=object)
    g[:60] = "zeros"
    cols["g"] = g.tolist()
    cols["y"] = cols["y"].copy()
    cols["y"][:60] = 0
    data = gf.write_parquet(tmp_path / "t.parquet", cols)
    s = gf.train(data, tmp_path / "m.gfm", "g", "y", "--valid-fraction", "0")
    assert s["fallback"]["one_class"] == 1 and s["fallback"]["few_rows"] == 0
    groups = gf.groups_by_key(gf.inspect(tmp_path / "m.gfm"))
    assert groups["zeros"]["route"] == "global" and "one class" in groups["zeros"]["fallback"]


def test_min_rows_boundary(gf, tmp_path):
    """A group with exactly --min-rows training rows gets its own model; one row fewer does not."""
    cols = base_cols(n=300, seed=9)
    g = np.array(cols["g"], dtype=object)
    g[:12] = "twelve"
    g[12:23] = "eleven"
    cols["g"] = g.tolist()
    cols["y"] = cols["y"].copy()
    cols["y"][:23] = np.arange(23) % 2  # both classes in each small group
    data = gf.write_parquet(tmp_path / "t.parquet", cols)
    s = gf.train(data, tmp_path / "m.gfm", "g", "y", "--valid-fraction", "0", "--min-rows", "12")
    groups = gf.groups_by_key(gf.inspect(tmp_path / "m.gfm"))
    assert groups["twelve"]["route"] == "own" and groups["twelve"]["n_train"] == 12
    assert groups["eleven"]["route"] == "global" and groups["eleven"]["n_train"] == 11
    assert s["fallback"]["few_rows"] == 1 and s["routes"]["groups_own"] == 3


def test_inspect_text_lists_groups(gf, model):
    rc, stdout, stderr = gf.run("inspect", model, "--top", "0")
    assert rc == 0 and stderr == ""
    lines = stdout.splitlines()
    assert any(ln.startswith("keys") and "g" in ln for ln in lines)
    assert any(ln.startswith("features") and "f0, f1, f2" in ln for ln in lines)
    rows = [ln.split()[0] for ln in lines if ln.split() and ln.split()[0] in {"a", "b", "c"}]
    assert sorted(rows) == ["a", "b", "c"]
    rc, stdout, _ = gf.run("inspect", model, "--top", "1")
    assert rc == 0 and "2 more groups" in stdout
