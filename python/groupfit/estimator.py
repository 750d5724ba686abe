"""A scikit-learn compatible estimator over :func:`groupfit.fit`."""

from __future__ import annotations

from typing import Any, Mapping, Optional, Sequence, Union

import numpy as np
import pyarrow as pa

from groupfit._convert import key_list, to_source

try:  # scikit-learn is optional: without it the estimator still works.
    from sklearn.base import BaseEstimator as _Base
    from sklearn.exceptions import NotFittedError
except ImportError:  # pragma: no cover
    _Base = object

    class NotFittedError(ValueError, AttributeError):
        """Raised when predicting with an estimator not fitted yet (as
        scikit-learn's ``NotFittedError``)."""

_TARGET = "__groupfit_target__"


class GroupedEstimator(_Base):
    """One model per group, scikit-learn style (a drop-in for scikit-lego's
    ``GroupedPredictor``): the key columns ``by`` are columns of ``X``.

    ``X``: pandas/polars DataFrame or pyarrow Table; ``y``: array-like. Text
    and ``category`` columns of ``X`` are categorical features.
    ``predict`` returns values (regression) or class labels 0/1 (binary, with
    ``predict_proba`` for probabilities). With ``hierarchy=True`` and
    ``shrinkage`` it stands in for scikit-lego's ``HierarchicalPredictor``:
    ``by=["region", "store"]`` as its ``groups``, and its ``shrinkage="equal"``
    here ``"equal"`` (``"constant:0.5"`` for its ``constant`` with ``alpha``).
    Other parameters mean what they mean in :func:`groupfit.fit`.
    """

    def __init__(
        self,
        model: str = "linear",
        by: Union[str, Sequence[str], None] = None,
        params: Optional[Mapping[str, Any]] = None,
        valid: float = 0.2,
        features: Optional[Sequence[str]] = None,
        categorical: Optional[Sequence[str]] = None,
        task: Optional[str] = None,
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
        self.task = task
        self.min_rows = min_rows
        self.threads = threads
        self.seed = seed
        self.strategy = strategy
        self.runner = runner
        self.hierarchy = hierarchy
        self.shrinkage = shrinkage

    if _Base is object:  # pragma: no cover - minimal protocol without sklearn

        def get_params(self, deep: bool = True) -> dict:
            return {k: getattr(self, k) for k in _PARAMS}

        def set_params(self, **params: Any) -> "GroupedEstimator":
            for k, v in params.items():
                if k not in _PARAMS:
                    raise ValueError(f"invalid parameter {k!r} for GroupedEstimator")
                setattr(self, k, v)
            return self

    def fit(self, X: Any, y: Any) -> "GroupedEstimator":
        """Trains on ``X`` (with the key columns) and the target ``y``."""
        from groupfit._model import fit

        if self.by is None:
            raise ValueError("GroupedEstimator needs by= (the key column names)")
        table = _table(X)
        yv = np.asarray(y, dtype=np.float64).reshape(-1)
        if len(yv) != table.num_rows:
            raise ValueError(f"X has {table.num_rows} rows but y has {len(yv)}")
        table = table.append_column(_TARGET, pa.array(yv))
        self.model_ = fit(
            table,
            by=key_list(self.by),
            target=_TARGET,
            model=self.model,
            params=self.params,
            valid=self.valid,
            features=self.features,
            categorical=self.categorical,
            task=self.task,
            min_rows=self.min_rows,
            threads=self.threads,
            seed=self.seed,
            strategy=self.strategy,
            runner=self.runner,
            hierarchy=self.hierarchy,
            shrinkage=self.shrinkage,
        )
        self.task_ = self.model_.task
        # scikit-learn's meaning: the columns of X seen in fit (keys included).
        self.feature_names_in_ = np.asarray(table.column_names[:-1], dtype=object)
        self.n_features_in_ = len(self.feature_names_in_)
        if self.task_ == "binary":
            self.classes_ = np.array([0, 1])
        return self

    def _check_fitted(self) -> None:
        if not hasattr(self, "model_"):
            raise NotFittedError("GroupedEstimator is not fitted yet; call fit(X, y) first")

    def _raw(self, X: Any) -> np.ndarray:
        self._check_fitted()
        return self.model_.predict(_table(X))

    def predict(self, X: Any) -> np.ndarray:
        """Values (regression) or labels 0/1 (binary: probability >= 0.5)."""
        p = self._raw(X)
        if self.task_ == "binary":
            return (p >= 0.5).astype(np.int64)
        return p

    def predict_proba(self, X: Any) -> np.ndarray:
        """Class probabilities ``[P(0), P(1)]`` per row (binary only)."""
        self._check_fitted()
        if self.task_ != "binary":
            raise AttributeError("predict_proba is only available for a binary task")
        p = self._raw(X)
        return np.column_stack([1.0 - p, p])

    def score(self, X: Any, y: Any) -> float:
        """Accuracy (binary) or R^2 (regression), as scikit-learn's mixins."""
        p = self.predict(X)
        yv = np.asarray(y, dtype=np.float64).reshape(-1)
        if self.task_ == "binary":
            return float(np.mean(p == yv))
        ss = float(np.sum((yv - yv.mean()) ** 2))
        return 1.0 - float(np.sum((yv - p) ** 2)) / ss if ss > 0 else 0.0


_PARAMS = (
    "model", "by", "params", "valid", "features", "categorical", "task", "min_rows",
    "threads", "seed", "strategy", "runner", "hierarchy", "shrinkage",
)


def _table(X: Any) -> pa.Table:
    t = to_source(X, "X")
    if isinstance(t, str):
        raise TypeError("X: expected a table (pandas/polars DataFrame or pyarrow Table), not a path")
    return t
