"""Turning user inputs into what the engine reads: Parquet or CSV paths, or Arrow streams.

Tables cross into the engine through the Arrow C data interface
(``__arrow_c_stream__``); nothing here loops over rows.
"""

from __future__ import annotations

import os
from typing import Any, Mapping, Sequence, Union

import pyarrow as pa

Source = Union[str, pa.Table]


def to_source(data: Any, what: str = "data") -> Source:
    """A Parquet or CSV path (``str``) or a ``pyarrow.Table`` for ``data``.

    Accepts a path (``str`` / ``os.PathLike``), a pyarrow Table or RecordBatch,
    a pandas DataFrame (its index is dropped), a polars DataFrame, or any
    object implementing ``__arrow_c_stream__``.
    """
    if isinstance(data, (str, os.PathLike)):
        return os.fspath(data)
    if isinstance(data, pa.Table):
        return data
    if isinstance(data, pa.RecordBatch):
        return pa.Table.from_batches([data])
    mod = type(data).__module__.split(".")[0]
    if mod == "pandas":
        return pa.Table.from_pandas(data, preserve_index=False)
    if hasattr(data, "__arrow_c_stream__"):
        return pa.table(data)
    if mod == "polars":
        return data.to_arrow()
    raise TypeError(
        f"{what}: expected a Parquet or CSV path, a pyarrow Table/RecordBatch, a pandas or "
        f"polars DataFrame, or an object with __arrow_c_stream__; got {type(data).__name__}"
    )


def grid_specs(params: Mapping[str, Any] | None) -> list[str]:
    """``{"C": [0.1, 1]}`` -> ``["C=0.1,1"]`` (a scalar is a one-value list)."""
    if not params:
        return []
    specs = []
    for name, values in params.items():
        if isinstance(values, (str, bytes)) or not isinstance(values, Sequence):
            if hasattr(values, "tolist"):
                values = values.tolist()
            if not isinstance(values, list):
                values = [values]
        if not values:
            raise ValueError(f"params[{name!r}]: an empty list of values")
        specs.append(f"{name}=" + ",".join(_num(v) for v in values))
    return specs


def _num(v: Any) -> str:
    if isinstance(v, bool):
        # A switch (gbdt's use_quantized_grad=True): the engine checks the name takes one.
        return "true" if v else "false"
    if isinstance(v, str):
        # A word value (optimizer="sgd", layers="64x32"): the engine checks it.
        if "," in v:
            raise ValueError(f"a grid value cannot contain ',': {v!r} (give a list of values)")
        return v.strip()
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return repr(v)
    try:
        return repr(float(v))
    except (TypeError, ValueError):
        raise TypeError(f"grid values must be numbers, got {v!r}") from None


def key_list(by: str | Sequence[str]) -> list[str]:
    """``"a"`` -> ``["a"]``; a sequence of names as a list."""
    if isinstance(by, str):
        return [by]
    return [str(b) for b in by]
