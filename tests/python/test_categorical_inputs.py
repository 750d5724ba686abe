"""Categorical features from every kind of input: pandas `category`, polars
`Categorical`, Arrow dictionaries, plain text and integers named categorical;
the same models whichever the input, predictions through the stored
dictionaries, and the errors of the Python API."""

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

import groupfit as gf
import groupfit.exceptions as gfe

LEVELS = ["north", "south", "east", "west"]


def frame(n=600, seed=0):
    rng = np.random.default_rng(seed)
    g = rng.choice(["a", "b", "c"], n)
    region = rng.choice(LEVELS, n)
    x = rng.standard_normal(n)
    effect = {"north": 2.0, "south": -2.0, "east": 0.5, "west": 0.0}
    y = x + np.array([effect[r] for r in region]) + 0.1 * rng.standard_normal(n)
    return pd.DataFrame({"g": g, "x": x, "region": region, "y": y})


@pytest.mark.parametrize("model", ["linear", "gbdt", "mlp"])
def test_every_input_kind_gives_the_same_model(model):
    df = frame()
    params = {"rounds": [20]} if model == "gbdt" else ({"epochs": [3]} if model == "mlp" else None)
    kw = dict(by="g", target="y", model=model, params=params, task="regression")
    text = gf.fit(df, **kw)
    assert text.summary["categorical"] == {"region": 4}
    as_category = df.assign(region=df["region"].astype("category"))
    dictionary = pa.Table.from_pandas(df, preserve_index=False)
    i = dictionary.schema.get_field_index("region")
    dictionary = dictionary.set_column(i, "region", dictionary.column("region").dictionary_encode())
    codes = df.assign(region=df["region"].map({r: i for i, r in enumerate(LEVELS)}).astype(np.int64))
    others = [gf.fit(as_category, **kw), gf.fit(dictionary, **kw)]
    try:
        import polars as pl
        others.append(gf.fit(pl.from_pandas(df).with_columns(pl.col("region").cast(pl.Categorical)), **kw))
    except ImportError:
        pass
    new = frame(seed=1)
    want = text.predict(new)
    for m in others:
        assert m.summary["categorical"] == {"region": 4}
        np.testing.assert_allclose(m.predict(new), want, rtol=1e-9, atol=1e-9)
        np.testing.assert_allclose(m.predict(new.assign(region=new["region"].astype("category"))), want,
                                   rtol=1e-9, atol=1e-9)
    # integers named categorical: the same categories under other names. A
    # network's one-hot inputs are ordered by frequency, ties by code, and its
    # initial weights follow that order: only linear models and trees (whose
    # answer does not depend on the order) must match.
    by_code = gf.fit(codes, categorical=["region"], **kw)
    assert by_code.summary["categorical"] == {"region": 4}
    new_codes = new.assign(region=new["region"].map({r: i for i, r in enumerate(LEVELS)}).astype(np.int64))
    if model != "mlp":
        np.testing.assert_allclose(by_code.predict(new_codes), want, rtol=1e-6, atol=1e-6)


def test_the_category_is_used():
    df = frame()
    with_cat = gf.fit(df, by="g", target="y", task="regression")
    without = gf.fit(df, by="g", target="y", task="regression", features=["x"])
    assert with_cat.summary["valid_rmse"] < 0.5 * without.summary["valid_rmse"]


def test_unseen_and_null_categories_predict():
    df = frame()
    m = gf.fit(df, by="g", target="y", task="regression")
    new = frame(n=10, seed=3)
    new.loc[0, "region"] = "mars"
    new.loc[1, "region"] = None
    p = m.predict(new)
    assert np.isfinite(p).all()


def test_errors_of_categorical_inputs():
    df = frame()
    with pytest.raises(gfe.TooManyCategoriesError, match="'region'.*4 distinct values"):
        gf.fit(df, by="g", target="y", max_categories=3)
    m = gf.fit(df, by="g", target="y")
    with pytest.raises(gfe.ColumnTypeError, match="'region'.*held text in training"):
        m.predict(df.assign(region=np.arange(len(df), dtype=np.float64)))
    with pytest.raises(gfe.ArgumentError, match="only text and integer columns can be categorical"):
        gf.fit(df, by="g", target="y", categorical=["x"])


def test_estimator_takes_categorical_columns_of_X():
    df = frame()
    X, y = df.drop(columns="y"), df["y"].to_numpy()
    est = gf.GroupedEstimator(by="g", task="regression").fit(X, y)
    assert est.model_.summary["categorical"] == {"region": 4}
    assert est.score(X, y) > 0.9
