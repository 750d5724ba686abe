"""scikit-learn estimators over :func:`groupfit.fit`: one model per group of ``X``'s key columns.

- :class:`GroupedRegressor`: a regressor (``score`` is R²).
- :class:`GroupedClassifier`: a binary classifier with ``classes_`` in the user's labels.
- :class:`GroupedEstimator`: picks the task from the target, as ``gf.fit`` does.

They need scikit-learn. They pass its ``check_estimator``; ``docs/python.md``
lists the checks that do not apply.
"""

from __future__ import annotations

from typing import Any, Mapping, Optional, Sequence, Union

import numpy as np
import pyarrow as pa
from sklearn.base import BaseEstimator, ClassifierMixin, RegressorMixin
from sklearn.utils.metaestimators import available_if
from sklearn.utils.multiclass import check_classification_targets, type_of_target
from sklearn.utils.validation import check_is_fitted

from groupfit._sklearn_input import numeric_target, target, to_table

_TARGET = "__groupfit_target__"

Key = Union[str, int]


class _GroupedBase(BaseEstimator):
    """What the three estimators share: parameters, input conversion, the engine call."""

    def __init__(
        self,
        model: str = "linear",
        by: Union[Key, Sequence[Key], None] = None,
        params: Optional[Mapping[str, Any]] = None,
        valid: float = 0.2,
        features: Optional[Sequence[Key]] = None,
        categorical: Optional[Sequence[Key]] = None,
        min_rows: int = 10,
        threads: int = 0,
        seed: int = 0,
        strategy: str = "auto",
        runner: Any = None,
        hierarchy: bool = False,
        shrinkage: Optional[str] = None,
    ):
        self.model = model
        self.by = by
        self.params = params
        self.valid = valid
        self.features = features
        self.categorical = categorical
        self.min_rows = min_rows
        self.threads = threads
        self.seed = seed
        self.strategy = strategy
        self.runner = runner
        self.hierarchy = hierarchy
        self.shrinkage = shrinkage

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        # Every family takes missing features: linear and mlp impute the
        # training mean, gbdt gives NaN a bin of its own.
        tags.input_tags.allow_nan = True
        return tags

    def _fit_engine(self, table: pa.Table, keys: list[str], y: np.ndarray, task: str) -> None:
        from groupfit._model import fit

        table = table.append_column(_TARGET, pa.array(np.asarray(y, dtype=np.float64)))
        self.model_ = fit(
            table,
            by=keys,
            target=_TARGET,
            model=self.model,
            params=self.params,
            valid=self.valid,
            features=_names(self.features),
            categorical=_names(self.categorical),
            task=task,
            min_rows=self.min_rows,
            threads=self.threads,
            seed=self.seed,
            strategy=self.strategy,
            runner=self.runner,
            hierarchy=self.hierarchy,
            shrinkage=self.shrinkage,
            # Silent, as scikit-learn's estimators are by default (a search
            # fits many).
            progress=False,
        )

    def _raw(self, X: Any) -> np.ndarray:
        """The engine's prediction per row: a value, or the probability of class 1."""
        check_is_fitted(self, "model_")
        table, _ = to_table(self, X, reset=False)
        return self.model_.predict(table)


def _names(columns: Optional[Sequence[Key]]) -> Optional[list[str]]:
    # An array's columns are named by position: "0", "1", ...
    return None if columns is None else [str(c) for c in columns]


class GroupedRegressor(RegressorMixin, _GroupedBase):
    """One regression model per group (a drop-in for scikit-lego's ``GroupedRegressor``).

    ``X`` is any array-like or a DataFrame or Arrow table. ``by`` names the key
    columns, or gives their positions in an array. ``predict`` routes each row
    to its group's model; unseen groups and groups under ``min_rows`` use the
    global model. Other parameters mean what they mean in :func:`groupfit.fit`.
    """

    def fit(self, X: Any, y: Any) -> "GroupedRegressor":
        """Trains on ``X`` (key columns included) and the target ``y``."""
        table, keys = to_table(self, X, reset=True)
        yv = numeric_target(self, y, table.num_rows)
        self._fit_engine(table, keys, yv, "regression")
        return self

    def predict(self, X: Any) -> np.ndarray:
        """The predicted value per row."""
        return self._raw(X)


class GroupedClassifier(ClassifierMixin, _GroupedBase):
    """One binary classifier per group (a drop-in for scikit-lego's ``GroupedClassifier``).

    Labels may be of any type; ``classes_`` holds the two, sorted.
    ``predict_proba`` has one column per class in ``classes_`` order. More
    than two classes raise a ``ValueError``. Parameters as :class:`GroupedRegressor`.
    """

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.classifier_tags.multi_class = False
        return tags

    def fit(self, X: Any, y: Any) -> "GroupedClassifier":
        """Trains on ``X`` (key columns included) and the labels ``y``."""
        table, keys = to_table(self, X, reset=True)
        yv = target(self, y, table.num_rows)
        check_classification_targets(yv)
        kind = type_of_target(yv, input_name="y", raise_unknown=True)
        classes, codes = np.unique(yv, return_inverse=True)
        if len(classes) < 2:
            raise ValueError(
                f"{type(self).__name__} needs samples of 2 classes; y has 1 class: {classes[0].tolist()!r}"
            )
        if kind != "binary":
            raise ValueError(
                f"Only binary classification is supported. The type of the target is {kind}."
            )
        self.classes_ = classes
        self._fit_engine(table, keys, codes, "binary")
        return self

    def predict_proba(self, X: Any) -> np.ndarray:
        """``[P(classes_[0]), P(classes_[1])]`` per row."""
        p = self._raw(X)
        return np.column_stack([1.0 - p, p])

    def predict(self, X: Any) -> np.ndarray:
        """The label per row: ``classes_[1]`` where its probability is above 0.5."""
        p = self._raw(X)
        return self.classes_[(p > 0.5).astype(np.intp)]


def _binary_or_unfitted(est: "GroupedEstimator") -> bool:
    if getattr(est, "task_", "binary") != "binary":
        raise AttributeError("predict_proba is only available for a binary task")
    return True


class GroupedEstimator(_GroupedBase):
    """One model per group; the task comes from ``task`` or from the target, as in ``gf.fit``.

    A target of only 0 and 1 is binary: ``predict`` gives labels 0/1 and
    ``predict_proba`` probabilities. Any other target is regression. With
    ``hierarchy=True`` and ``shrinkage`` it stands in for scikit-lego's
    ``HierarchicalPredictor``. Parameters as :class:`GroupedRegressor`.
    """

    def __init__(
        self,
        model: str = "linear",
        by: Union[Key, Sequence[Key], None] = None,
        params: Optional[Mapping[str, Any]] = None,
        valid: float = 0.2,
        features: Optional[Sequence[Key]] = None,
        categorical: Optional[Sequence[Key]] = None,
        task: Optional[str] = None,
        min_rows: int = 10,
        threads: int = 0,
        seed: int = 0,
        strategy: str = "auto",
        runner: Any = None,
        hierarchy: bool = False,
        shrinkage: Optional[str] = None,
    ):
        super().__init__(
            model=model, by=by, params=params, valid=valid, features=features,
            categorical=categorical, min_rows=min_rows, threads=threads, seed=seed,
            strategy=strategy, runner=runner, hierarchy=hierarchy, shrinkage=shrinkage,
        )
        self.task = task

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.required = True
        return tags

    def fit(self, X: Any, y: Any) -> "GroupedEstimator":
        """Trains on ``X`` (key columns included) and the target ``y``."""
        table, keys = to_table(self, X, reset=True)
        yv = numeric_target(self, y, table.num_rows)
        task = self.task
        if task is None:  # the engine's rule: only 0 and 1 is binary
            task = "binary" if np.all((yv == 0) | (yv == 1)) else "regression"
        if task == "binary" and len(np.unique(yv)) < 2:
            raise ValueError(f"a binary target needs both 0 and 1; y has one class only ({yv[0]:g})")
        self._fit_engine(table, keys, yv, task)
        self.task_ = self.model_.task
        if self.task_ == "binary":
            self.classes_ = np.array([0, 1])
        return self

    def predict(self, X: Any) -> np.ndarray:
        """Values (regression) or labels 0/1 (binary: 1 where its probability is above 0.5)."""
        p = self._raw(X)
        if self.task_ == "binary":
            return (p > 0.5).astype(np.int64)
        return p

    @available_if(_binary_or_unfitted)
    def predict_proba(self, X: Any) -> np.ndarray:
        """Class probabilities ``[P(0), P(1)]`` per row (binary only: a regression
        estimator has no ``predict_proba``, as a scikit-learn regressor)."""
        p = self._raw(X)
        return np.column_stack([1.0 - p, p])

    def score(self, X: Any, y: Any) -> float:
        """Accuracy (binary) or R² (regression), as scikit-learn's mixins."""
        from sklearn.metrics import accuracy_score, r2_score

        check_is_fitted(self, "model_")
        if self.task_ == "binary":
            return float(accuracy_score(y, self.predict(X)))
        return float(r2_score(y, self.predict(X)))
