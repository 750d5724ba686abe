"""The scikit-learn estimators: scikit-learn's own estimator checks, array-like
inputs, labels, errors in scikit-learn's wording, pipelines, and the same
models as gf.fit."""

from __future__ import annotations

import pickle
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import polars as pl
import pyarrow as pa
import pytest
import scipy.sparse as sp
from sklearn.base import clone, is_classifier, is_regressor
from sklearn.exceptions import DataConversionWarning
from sklearn.model_selection import cross_val_predict, cross_val_score
from sklearn.utils.estimator_checks import check_estimator, parametrize_with_checks

import groupfit as gf

REPO = Path(__file__).resolve().parents[2]
CLASSES = (gf.GroupedEstimator, gf.GroupedRegressor, gf.GroupedClassifier)
FAMILIES = {"linear": None, "gbdt": None, "mlp": {"epochs": [100]}}

# mlp's defaults (5 epochs) on a check's 200 rows are 5 optimizer steps.
UNDERFIT = "mlp's default 5 epochs on 200 rows underfit the check's score threshold"


def expected_failures(est) -> dict:
    """The checks documented (docs/python.md) to fail, with the reason for each."""
    if est.model == "mlp" and not est.params:
        if isinstance(est, gf.GroupedRegressor):
            return {"check_regressors_train": UNDERFIT}
        if isinstance(est, gf.GroupedClassifier):
            return {"check_classifiers_train": UNDERFIT}
    return {}


# strategy="tp": whole groups, so two fits sum in the same order whatever
# the machine's timings make of `auto` (check_fit_idempotent asks 1e-9).
ESTIMATORS = [cls(by=[0], model=f, params=p, strategy="tp") for f, p in FAMILIES.items()
              for cls in CLASSES]
ESTIMATORS += [cls(by=[0], model="mlp") for cls in CLASSES]
# min_rows=1: the check data's one-row groups get models of their own.
ESTIMATORS += [cls(by=[0], model=f, params=p, min_rows=1) for f, p in FAMILIES.items()
               for cls in CLASSES]
ESTIMATORS += [gf.GroupedRegressor(by=[0], shrinkage="auto"),
               gf.GroupedClassifier(by=[0], shrinkage="equal"),
               gf.GroupedRegressor(by=[0], strategy="dp", threads=2)]


@parametrize_with_checks(ESTIMATORS, expected_failed_checks=expected_failures)
def test_scikit_learn_estimator_checks(estimator, check):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        check(estimator)


@pytest.mark.parametrize("family", ["linear", "gbdt", "mlp"])
@pytest.mark.parametrize("cls", CLASSES)
def test_check_estimator_fails_only_the_documented_checks(cls, family):
    est = cls(by=[0], model=family)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        results = check_estimator(est, on_fail=None, on_skip=None)
    failed = {r["check_name"] for r in results if r["status"] == "failed"}
    assert failed == set(expected_failures(est))
    assert len(failed) <= 4 if family == "linear" else True
    passed = sum(r["status"] == "passed" for r in results)
    assert passed >= {gf.GroupedEstimator: 40, gf.GroupedRegressor: 47,
                      gf.GroupedClassifier: 51}[cls]


def test_tags_say_what_the_estimators_are():
    assert is_regressor(gf.GroupedRegressor()) and not is_classifier(gf.GroupedRegressor())
    assert is_classifier(gf.GroupedClassifier())
    assert not is_classifier(gf.GroupedEstimator()) and not is_regressor(gf.GroupedEstimator())
    for cls in CLASSES:
        assert cls().__sklearn_tags__().input_tags.allow_nan
    assert not gf.GroupedClassifier().__sklearn_tags__().classifier_tags.multi_class


def grouped_array(seed=0, n=3000, groups=12, binary=False):
    """Column 0 is an integer key; columns 1..3 are features with a slope per group."""
    rng = np.random.default_rng(seed)
    key = rng.integers(0, groups, size=n)
    x = rng.normal(size=(n, 3))
    z = (x * rng.normal(size=(groups, 3))[key]).sum(axis=1) + rng.normal(size=groups)[key]
    y = (rng.random(n) < 1 / (1 + np.exp(-z))).astype(float) if binary else z + 0.3 * rng.normal(size=n)
    return np.column_stack([key, x]), y


def reference(X, y, task, **kw):
    """gf.fit on the same columns, named by position as the estimators name an array's."""
    cols = {str(j): X[:, j] for j in range(X.shape[1])}
    return gf.fit(pa.table({**cols, "y": y}), by="0", target="y", task=task, **kw)


def test_every_array_like_gives_the_models_of_gf_fit(tmp_path):
    X, y = grouped_array()
    ref = reference(X, y, "regression", seed=3).predict(pa.table({str(j): X[:, j] for j in range(4)}))
    est = gf.GroupedRegressor(by=[0], seed=3).fit(X, y)
    assert est.model_.summary["models"] > 10
    np.testing.assert_array_equal(est.predict(X), ref)
    memmap = np.memmap(tmp_path / "x.dat", dtype=np.float64, mode="w+", shape=X.shape)
    memmap[:] = X
    readonly = X.copy()
    readonly.flags.writeable = False
    frame = pd.DataFrame(X)                                   # integer column labels
    variants = {
        "list": X.tolist(), "fortran": np.asfortranarray(X), "readonly": readonly,
        "memmap": memmap, "pandas-int-labels": frame,
        "pyarrow": pa.table({str(j): X[:, j] for j in range(4)}),
        "polars": pl.DataFrame({str(j): X[:, j] for j in range(4)}),
    }
    for name, data in variants.items():
        fitted = gf.GroupedRegressor(by=[0], seed=3).fit(data, list(y))
        np.testing.assert_array_equal(fitted.predict(data), ref, err_msg=name)
    np.testing.assert_array_equal(X, readonly)                # inputs are not mutated


def test_frames_take_key_names_and_check_them_at_predict():
    X, y = grouped_array(1)
    df = pd.DataFrame(X, columns=["store", "a", "b", "c"])
    est = gf.GroupedRegressor(by="store").fit(df, pd.Series(y))
    assert list(est.feature_names_in_) == ["store", "a", "b", "c"] and est.n_features_in_ == 4
    assert est.model_.key_columns == ["store"]
    with pytest.raises(ValueError, match="feature names should match"):
        est.predict(df.rename(columns={"a": "z"}))
    with pytest.raises(ValueError, match="X has 3 features, but GroupedRegressor is expecting 4"):
        est.predict(X[:, :3])
    # An array predicts with a frame's model (scikit-learn warns), and the reverse.
    with pytest.warns(UserWarning, match="X does not have valid feature names"):
        np.testing.assert_array_equal(est.predict(X), est.predict(df))
    on_array = gf.GroupedRegressor(by=[0]).fit(X, y)
    with pytest.warns(UserWarning, match="X has feature names"):
        np.testing.assert_array_equal(on_array.predict(df), on_array.predict(X))
    with pytest.raises(ValueError, match="X has no column 'shop'"):
        gf.GroupedRegressor(by="shop").fit(df, y)
    with pytest.raises(ValueError, match="by= takes column positions 0..3"):
        gf.GroupedRegressor(by=[4]).fit(X, y)


def test_object_arrays_keep_text_keys_and_text_features():
    X, y = grouped_array(2, n=2000, groups=4)
    names = np.array(["north", "south", "east", "west"], dtype=object)
    colour = np.array(["red", "blue"], dtype=object)[(X[:, 1] > 0).astype(int)]
    Xo = np.column_stack([names[X[:, 0].astype(int)], X[:, 1:], colour]).astype(object)
    est = gf.GroupedRegressor(by=[0]).fit(Xo, y)
    assert est.model_.summary["categorical"] == {"4": 2}
    assert est.model_.summary["models"] == 5                  # 4 groups and the global model
    assert est.score(Xo, y) > 0.8


@pytest.mark.parametrize("labels", [("no", "yes"), (False, True), (3, 7)])
def test_classifier_keeps_the_users_labels(labels):
    X, y01 = grouped_array(3, binary=True)
    y = np.where(y01 == 1, labels[1], labels[0])
    est = gf.GroupedClassifier(by=[0], seed=2).fit(X, y)
    assert list(est.classes_) == sorted(labels) and est.classes_.dtype == np.asarray(labels).dtype
    p1 = reference(X, y01, "binary", seed=2).predict(pa.table({str(j): X[:, j] for j in range(4)}))
    proba = est.predict_proba(X)
    np.testing.assert_array_equal(proba[:, 1], p1)
    np.testing.assert_array_equal(proba.sum(axis=1), 1.0)
    np.testing.assert_array_equal(est.predict(X), np.where(p1 > 0.5, labels[1], labels[0]))
    assert est.score(X, y) > 0.7
    # is_classifier: cross-validation stratifies, and predict_proba gives a column per class
    assert cross_val_score(clone(est), X, y, cv=3).mean() > 0.7
    assert cross_val_predict(clone(est), X, y, cv=3, method="predict_proba").shape == (len(y), 2)


def test_classifier_refuses_other_targets():
    X, y01 = grouped_array(4, binary=True)
    with pytest.raises(ValueError, match="Only binary classification is supported. The type "
                                         "of the target is multiclass."):
        gf.GroupedClassifier(by=[0]).fit(X, np.arange(len(y01)) % 3)
    with pytest.raises(ValueError, match="needs samples of 2 classes; y has 1 class: 'a'"):
        gf.GroupedClassifier(by=[0]).fit(X, ["a"] * len(y01))
    with pytest.raises(ValueError, match="Unknown label type: continuous"):
        gf.GroupedClassifier(by=[0]).fit(X, y01 + 0.5)


def test_grouped_estimator_picks_the_task_from_the_target():
    X, y01 = grouped_array(5, binary=True)
    est = gf.GroupedEstimator(by=[0]).fit(X, y01)
    assert est.task_ == "binary" and list(est.classes_) == [0, 1]
    assert est.predict_proba(X).shape == (len(y01), 2)
    Xr, yr = grouped_array(5)
    reg = gf.GroupedEstimator(by=[0]).fit(Xr, yr)
    assert reg.task_ == "regression" and not hasattr(reg, "predict_proba")
    forced = gf.GroupedEstimator(by=[0], task="regression").fit(X, y01)
    assert forced.task_ == "regression"
    with pytest.raises(ValueError, match="one class only"):
        gf.GroupedEstimator(by=[0]).fit(X, np.ones(len(y01)))


def test_inputs_are_refused_with_scikit_learns_messages():
    X, y = grouped_array(6, n=400)
    est = gf.GroupedRegressor(by=[0])
    with pytest.raises(TypeError, match="Sparse data was passed for X, but dense data is required"):
        est.fit(sp.csr_matrix(X), y)
    with pytest.raises(ValueError, match=r"Found array with 0 sample\(s\)"):
        est.fit(X[:0], y[:0])
    with pytest.raises(ValueError, match=r"Found array with 0 sample\(s\)"):
        est.fit(pd.DataFrame(X)[:0], y[:0])
    with pytest.raises(ValueError, match="Expected 2D array, got 1D array"):
        est.fit(X[:, 1], y)
    bad = X.copy()
    bad[3, 2] = np.inf
    with pytest.raises(ValueError, match="Input X contains infinity"):
        est.fit(bad, y)
    with pytest.raises(ValueError, match="Input X contains infinity \\(column '2'\\)"):
        est.fit(pa.table({str(j): bad[:, j] for j in range(4)}), y)
    with pytest.raises(ValueError, match="Complex data not supported"):
        est.fit(X + 1j, y)
    with pytest.raises(ValueError, match=r"X has 1 feature\(s\) and by=\[0\] uses all of them"):
        est.fit(X[:, :1], y)
    with pytest.raises(ValueError, match="Input y contains NaN"):
        est.fit(X, np.where(np.arange(len(y)) == 5, np.nan, y))
    with pytest.raises(ValueError, match="inconsistent numbers of samples"):
        est.fit(X, y[:-1])
    with pytest.raises(ValueError, match="requires y to be passed"):
        est.fit(X, None)
    with pytest.raises(ValueError, match="needs by="):
        gf.GroupedRegressor().fit(X, y)
    with pytest.warns(DataConversionWarning):
        est.fit(X, y.reshape(-1, 1))


@pytest.mark.parametrize("family", ["linear", "gbdt", "mlp"])
def test_missing_features_are_allowed_in_every_family(family):
    X, y = grouped_array(7, n=1500)
    X[::7, 2] = np.nan
    est = gf.GroupedRegressor(by=[0], model=family, params=FAMILIES[family]).fit(X, y)
    p = est.predict(X)
    assert np.isfinite(p).all() and est.score(X, y) > 0.3


def test_hierarchy_parameters_survive_clone_and_pickle():
    rng = np.random.default_rng(8)
    n = 3000
    df = pd.DataFrame({"region": rng.integers(0, 3, n).astype(str),
                       "store": rng.integers(0, 9, n).astype(str), "x": rng.normal(size=n)})
    y = df["x"] * (1 + df["store"].astype(int) / 10) + rng.normal(size=n)
    est = gf.GroupedRegressor(by=["region", "store"], hierarchy=True, shrinkage="equal")
    params = est.get_params()
    assert params["hierarchy"] is True and params["shrinkage"] == "equal"
    copy = clone(est).set_params(shrinkage="constant:0.5")
    assert copy.shrinkage == "constant:0.5" and est.shrinkage == "equal"
    est.fit(df, y)
    assert est.get_params() == params                          # fit leaves the parameters
    again = pickle.loads(pickle.dumps(est))
    np.testing.assert_array_equal(again.predict(df), est.predict(df))
    assert again.model_.summary == est.model_.summary


def docs_pipeline_example() -> str:
    text = (REPO / "docs" / "python.md").read_text()
    marker = "<!-- tested: tests/python/test_sklearn_estimators.py runs this block -->\n```python\n"
    return text.split(marker)[1].split("```")[0]


def test_the_pipeline_example_in_the_docs_runs_and_matches_gf_fit():
    scope: dict = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        exec(docs_pipeline_example(), scope)
    assert scope["scores"].mean() > 0.6
    assert scope["search"].best_params_["model__min_rows"] == 10
    # The pipeline's model is gf.fit's on the transformed array.
    pipe, X, y = scope["pipe"], scope["X"], scope["y"]
    pipe.fit(X, y)
    Z = pipe.named_steps["prep"].transform(X)
    ref = reference(Z, y, "regression")
    np.testing.assert_array_equal(pipe.predict(X),
                                  ref.predict(pa.table({str(j): Z[:, j] for j in range(4)})))


def test_import_groupfit_without_scikit_learn():
    code = (
        "import sys; sys.modules['sklearn'] = None\n"
        "import groupfit as gf, pyarrow as pa\n"
        "m = gf.fit(pa.table({'g': ['a'] * 30, 'x': [float(i) for i in range(30)],"
        " 'y': [2.0 * i for i in range(30)]}), by='g', target='y')\n"
        "try:\n    gf.GroupedRegressor\nexcept ImportError as e:\n    print(e)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "groupfit.GroupedRegressor needs scikit-learn: pip install 'groupfit[sklearn]'" in out.stdout
