"""scikit-learn's input conventions for the estimators: any array-like ``X`` becomes an Arrow table.

Validation follows ``check_array``: the same messages for sparse, empty, complex,
1-D and infinite input. It runs before the engine is called, so every refusal
is the ``ValueError`` or ``TypeError`` scikit-learn's tools expect.
"""

from __future__ import annotations

import numbers
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from sklearn.utils.validation import (
    assert_all_finite,
    check_array,
    check_consistent_length,
    column_or_1d,
    validate_data,
)

from groupfit._convert import to_source

SPARSE_MESSAGE = (
    "Sparse data was passed for X, but dense data is required. "
    "Use '.toarray()' to convert to a dense numpy array."
)


def is_table(X: Any) -> bool:
    """A pyarrow Table or RecordBatch, a pandas or polars DataFrame, or an Arrow stream."""
    if isinstance(X, (pa.Table, pa.RecordBatch)):
        return True
    if type(X).__module__.split(".")[0] in ("pandas", "polars") and hasattr(X, "columns"):
        return True
    return hasattr(X, "__arrow_c_stream__")


def _is_sparse(X: Any) -> bool:
    try:
        import scipy.sparse as sp
    except ImportError:  # pragma: no cover - scikit-learn depends on scipy
        return False
    return sp.issparse(X)


def to_table(est: Any, X: Any, reset: bool) -> tuple[pa.Table, list[str]]:
    """``X`` as a table and the key columns' names in it.

    At fit (``reset``) it sets ``n_features_in_`` and ``feature_names_in_``.
    At predict it checks them and names the columns as at fit, so an array
    predicts with a model fitted on a frame, and the reverse.
    """
    if est.by is None:
        raise ValueError(
            f"{type(est).__name__} needs by= (key column names, or positions for an array X)"
        )
    if _is_sparse(X):
        raise TypeError(SPARSE_MESSAGE)
    array = not is_table(X)
    table = _from_array(X) if array else _from_table(X)
    validate_data(est, X, skip_check_array=True, reset=reset)
    if not reset:
        return table.rename_columns(est._columns_in), list(est.model_.key_columns)
    keys = _keys(est.by, table.column_names, array)
    if len(set(keys)) >= table.num_columns:
        raise ValueError(
            f"X has {table.num_columns} feature(s) and by={est.by!r} uses all of them; "
            "at least one feature column is needed"
        )
    est._columns_in = table.column_names
    return table, keys


def _by_list(by: Any) -> list:
    if isinstance(by, (str, numbers.Integral)):
        return [by]
    return list(by)


def _from_table(X: Any) -> pa.Table:
    table = to_source(X, "X")
    rows = table.num_rows if table.num_columns else 0
    if rows == 0:
        raise ValueError(
            f"Found array with 0 sample(s) (shape={(rows, table.num_columns)}) "
            "while a minimum of 1 is required."
        )
    for name, column in zip(table.column_names, table.columns):
        if pa.types.is_floating(column.type) and pc.any(pc.is_inf(column)).as_py():
            raise ValueError(f"Input X contains infinity (column {name!r}).")
    return table


def _keys(by: Any, names: list[str], array: bool) -> list[str]:
    """The key columns' names: ``by`` names them, or gives positions (always for an array)."""
    keys = []
    for k in _by_list(by):
        position = isinstance(k, numbers.Integral) and not isinstance(k, bool)
        if array and not (position and -len(names) <= k < len(names)):
            raise ValueError(
                f"by={by!r}: with an array X, by= takes column positions 0..{len(names) - 1}"
            )
        if not position and not isinstance(k, str):
            raise ValueError(f"by={by!r}: key columns are names, or positions for an array X")
        if position and str(k) not in names:
            # A position into a frame whose columns are named otherwise.
            if not -len(names) <= k < len(names):
                raise ValueError(f"by={by!r}: X has {len(names)} columns, no position {k}")
            k = names[k]
        if str(k) not in names:
            raise ValueError(f"by={by!r}: X has no column {str(k)!r}; its columns are {names}")
        keys.append(str(k))
    return keys


def _from_array(X: Any) -> pa.Table:
    arr = check_array(
        X, dtype=None, ensure_all_finite=False, ensure_2d=True, allow_nd=False,
        ensure_min_samples=1, ensure_min_features=1, input_name="X",
    )
    return pa.table({str(j): _column(arr[:, j]) for j in range(arr.shape[1])})


def _column(col: np.ndarray) -> pa.Array:
    """One column of an array: numbers stay numbers (NaN allowed, infinity refused);
    an object column of text becomes text (a categorical feature, or key)."""
    if col.dtype == object:
        try:
            col = col.astype(np.float64)
        except ValueError:
            if all(v is None or isinstance(v, str) for v in col):
                return pa.array(col.tolist(), type=pa.string())
            raise
    if col.dtype.kind in "US":
        return pa.array(col.astype(str).tolist(), type=pa.string())
    if col.dtype.kind == "f":
        assert_all_finite(col, allow_nan=True, input_name="X")
    return pa.array(np.ascontiguousarray(col))


def target(est: Any, y: Any, rows: int) -> np.ndarray:
    """``y`` as a 1-D array of ``rows`` values (a column vector warns, as scikit-learn does)."""
    if y is None:
        raise ValueError(
            f"{type(est).__name__} requires y to be passed, but the target y is None"
        )
    y = column_or_1d(y, warn=True)
    check_consistent_length(np.empty((rows, 0)), y)
    return y


def numeric_target(est: Any, y: Any, rows: int) -> np.ndarray:
    """``target``, as finite float64 values."""
    y = target(est, y, rows)
    return check_array(y, ensure_2d=False, dtype=np.float64, input_name="y")
