"""``fit``, ``load`` and :class:`GroupedModel`."""

from __future__ import annotations

import json
import os
from typing import Any, Callable, Iterable, Iterator, Mapping, Optional, Sequence, Union

import numpy as np
import pyarrow as pa

from groupfit import _native
from groupfit._convert import grid_specs, key_list, to_source
from groupfit._progress import Reporter, wanted
from groupfit.exceptions import ArgumentError
from groupfit.runners import resolve_runner


class GroupedModel:
    """A trained set of per-group models: what ``fit`` returns and ``load`` reads.

    The same model file as the CLI's ``groupfit train --out`` (``.gfm``).
    """

    def __init__(
        self,
        bundle: "_native.Bundle",
        runner_info: Optional[dict] = None,
        name: str = "model",
    ):
        self._bundle = bundle
        #: The name reports give the model: its file name when loaded from one.
        self.name = name
        self._summary = json.loads(bundle.summary_json())
        #: What the runner reports beyond the summary (e.g. the Ray runner's
        #: communication and compute seconds); empty for the native runner.
        self.runner_info: dict = dict(runner_info or {})

    @property
    def summary(self) -> dict:
        """The training summary: the same keys and meanings as ``groupfit train --json``."""
        return dict(self._summary)

    @property
    def scores(self) -> pa.Table:
        """One row per training group: key columns (strings), ``rows``, ``valid_rows``,
        ``config`` (chosen; null when the group uses the global model),
        ``valid_logloss``/``valid_auc`` (binary) or ``valid_rmse`` (regression) of the
        model serving the group, ``route`` (``own``/``global``, or ``none``: no model,
        trained with ``global_model=False``) and ``fallback``. With ``hierarchy`` or
        ``shrinkage``, each level's groups follow (finer key columns null), with
        ``level`` (its key columns), ``weight`` (its own model's weight in the blend
        of its rows' predictions) and ``parent`` (``global`` at the top level)."""
        return pa.Table.from_batches([self._bundle.scores()])

    @property
    def key_columns(self) -> list[str]:
        """The key columns."""
        return self._bundle.key_columns

    @property
    def features(self) -> list[str]:
        """The feature columns, in model order."""
        return self._bundle.features

    @property
    def target(self) -> str:
        """The target column."""
        return self._bundle.target

    @property
    def task(self) -> str:
        """``binary`` or ``regression``."""
        return self._bundle.task

    def predict(self, data: Any) -> np.ndarray:
        """Predictions for every row of ``data`` (table, Parquet or CSV path), in row order:
        the probability of class 1 (binary) or the value (regression). Rows of groups
        unseen in training, or that fell back, use the global model; without one
        (``global_model=False``) such rows raise :class:`groupfit.exceptions.NoModelError`."""
        batch = self._bundle.predict(to_source(data), False)
        return batch.column(batch.num_columns - 1).to_numpy(zero_copy_only=False)

    def predict_table(self, data: Any, with_route: bool = True) -> pa.Table:
        """Like :meth:`predict`, as a table: key columns, ``prediction`` and
        (with ``with_route``) ``route`` (``own``/``fallback``/``unseen``) — what
        ``groupfit predict --with-route`` writes."""
        return pa.Table.from_batches([self._bundle.predict(to_source(data), with_route)])

    def predict_batches(self, data: Any, with_route: bool = True) -> Iterator[pa.RecordBatch]:
        """Predictions batch by batch, for inputs larger than memory: yields
        record batches of the key columns, ``prediction`` and (with
        ``with_route``) ``route``, in the input's row order.

        ``data`` is a Parquet or CSV path (read 65,536 rows at a time), a
        ``pyarrow.RecordBatchReader``, a table or DataFrame (predicted in
        slices of 65,536 rows), or any iterable of record batches or tables.
        Memory is bounded by a batch and the model, not the input."""
        if isinstance(data, (str, os.PathLike)):
            yield from self._bundle.predict_batches(os.fspath(data), with_route)
            return
        for batch in _batches(data):
            yield self._bundle.predict(pa.Table.from_batches([batch]), with_route)

    def report(self, path: Union[str, os.PathLike], valid: Any = None) -> str:
        """Writes an HTML report of the model to ``path`` and returns the path.

        One self-contained file: inline SVG plots, no scripts, nothing
        fetched. It shows each group's validation metric against its size,
        their spread, the gain over the global model, the routes, the best
        and worst groups, the chosen configs, the training cost and each
        family's own plot. With ``valid`` (a table or a Parquet or CSV path
        with the key, feature and target columns), the scores are computed
        on those rows too. The same as ``groupfit report MODEL --out PATH``.
        """
        out = os.fspath(path)
        source = None if valid is None else to_source(valid, "valid")
        self._bundle.report(out, source, self.name)
        return out

    def _repr_html_(self) -> str:
        """The report's compact view, shown inline by notebooks."""
        return self._bundle.report_inline(self.name)

    def save(self, path: Union[str, os.PathLike]) -> None:
        """Writes the model file (atomically: a failed write leaves nothing behind)."""
        self._bundle.save(os.fspath(path))

    def to_bytes(self) -> bytes:
        """The model file's bytes."""
        return self._bundle.to_bytes()

    @classmethod
    def from_bytes(cls, data: bytes) -> "GroupedModel":
        """A model from the bytes of a model file."""
        return cls(_native.Bundle.from_bytes(data))

    def __reduce__(self):
        return (GroupedModel.from_bytes, (self.to_bytes(),))

    def __repr__(self) -> str:
        s = self._summary
        return (
            f"GroupedModel({s.get('model')}, {s.get('task')}, groups={s.get('groups')}, "
            f"models={s.get('models')}, by={self.key_columns})"
        )


STREAM_ROWS = 1 << 16


def _batches(data: Any) -> Iterator[pa.RecordBatch]:
    """``data``'s record batches, at most ``STREAM_ROWS`` rows each."""
    if isinstance(data, pa.RecordBatch):
        yield from pa.Table.from_batches([data]).to_batches(max_chunksize=STREAM_ROWS)
    elif isinstance(data, pa.RecordBatchReader):
        for batch in data:
            yield from _batches(batch)
    elif isinstance(data, pa.Table) or hasattr(data, "__arrow_c_stream__") or type(data).__module__.split(".")[0] in (
        "pandas",
        "polars",
    ):
        yield from to_source(data).to_batches(max_chunksize=STREAM_ROWS)
    elif isinstance(data, Iterable):
        for part in data:
            if not isinstance(part, (pa.RecordBatch, pa.Table)):
                raise TypeError(f"predict_batches: expected record batches or tables, got {type(part).__name__}")
            yield from _batches(part)
    else:
        to_source(data)  # raises its TypeError naming what is accepted


def load(path: Union[str, os.PathLike]) -> GroupedModel:
    """Reads a model file written by :meth:`GroupedModel.save` or ``groupfit train``."""
    return GroupedModel(
        _native.Bundle.load(os.fspath(path)), name=os.path.basename(os.fspath(path))
    )


def fit(
    data: Any,
    by: Union[str, Sequence[str]],
    target: str,
    model: str = "linear",
    params: Optional[Mapping[str, Any]] = None,
    valid: Any = 0.2,
    features: Optional[Sequence[str]] = None,
    categorical: Optional[Sequence[str]] = None,
    max_categories: int = 10_000,
    task: Optional[str] = None,
    min_rows: int = 10,
    threads: int = 0,
    seed: int = 0,
    strategy: str = "auto",
    runner: Any = None,
    global_model: bool = True,
    hierarchy: bool = False,
    shrinkage: Optional[str] = None,
    max_memory: Union[int, str, None] = None,
    progress: Optional[bool] = None,
    callback: Optional[Callable[[str, float, float, float], Any]] = None,
) -> GroupedModel:
    """Trains one model per group (and per config of the grid ``params``) and
    returns a :class:`GroupedModel`.

    ``data``: pyarrow Table/RecordBatch, pandas or polars DataFrame, or a Parquet
    or CSV path (``.csv``, ``.csv.gz``). ``by``: key column(s). ``valid``: a fraction of rows held out (float), or
    a validation table/path. ``params``: ``{"C": [0.01, 0.1, 1]}``, the grid being the
    product of the lists. ``runner``: ``"native"`` (default, in-process), ``"ray"``,
    a :class:`groupfit.runners.Runner`, or ``None`` to read ``GROUPFIT_RUNNER``.
    ``global_model=False`` is the CLI's ``--no-global``: no global model, so
    groups that would fall back have none, and predicting rows of such groups
    (or of unseen groups) raises :class:`groupfit.exceptions.NoModelError`.
    ``hierarchy=True`` (two or more ``by`` columns) is the CLI's
    ``--hierarchy``: a model set at every prefix level of ``by`` too, and a
    group without a model of its own uses its nearest level's.
    ``shrinkage`` is the CLI's ``--shrinkage``: ``"none"``, ``"auto"``,
    ``"equal"``, ``"relative"``, ``"constant:ALPHA"`` or ``"min_n_obs:N"``.
    A row's prediction then blends the models on its group's path (the
    global model, each level's, its own). The default is ``"auto"`` with
    ``hierarchy=True`` and ``"none"`` without (see ``docs/hierarchy.md``).
    Text, pandas ``category`` and Arrow dictionary columns are categorical
    features; ``categorical`` also makes integer columns categorical (see
    ``docs/families.md``).
    ``max_memory`` (bytes, or ``"4G"``) is the CLI's ``--max-memory``: a
    job whose estimated peak is higher raises
    :class:`groupfit.exceptions.MemoryLimitError` before its features are
    read. By default the limit is the memory available. The estimate and
    the peak are in ``summary["memory"]``.
    ``progress=True`` draws a progress bar on stderr (``tqdm.auto`` when
    installed, else a plain line): the stage, the share of the work done,
    the time left and the models trained. The default is to draw it when
    stderr is a terminal or in a notebook; ``progress=False`` draws nothing.
    ``callback(stage, done, total, elapsed)`` is called as the job goes:
    ``done`` and ``total`` are work in the planner's units, ``done`` never
    goes back, and the last call has ``done == total`` (see
    ``docs/progress.md``). An exception it raises is raised when training ends.
    The other arguments mean what the CLI's ``train`` options mean.
    """
    args = dict(locals())
    r, job = _job(args)
    job["command"] = _call(args)
    reporter = Reporter(wanted(progress), callback)
    job["progress"] = reporter
    try:
        bundle = r.fit(job)
    finally:
        reporter.close()
    return GroupedModel(bundle, runner_info=getattr(r, "last_info", None))


def explain(
    data: Any,
    by: Union[str, Sequence[str]],
    target: str,
    model: str = "linear",
    params: Optional[Mapping[str, Any]] = None,
    valid: Any = 0.2,
    features: Optional[Sequence[str]] = None,
    categorical: Optional[Sequence[str]] = None,
    max_categories: int = 10_000,
    task: Optional[str] = None,
    min_rows: int = 10,
    threads: int = 0,
    seed: int = 0,
    strategy: str = "auto",
    runner: Any = None,
    global_model: bool = True,
    hierarchy: bool = False,
    shrinkage: Optional[str] = None,
    max_memory: Union[int, str, None] = None,
) -> dict:
    """What :func:`fit` with the same arguments would run, priced, nothing
    trained: the CLI's ``groupfit explain --json`` as a dict (``auto``, the
    cost model, every strategy's estimate). With ``runner="ray"`` (or a
    :class:`groupfit.RayRunner`), the Ray runner's plans, priced with the
    network measured to its actors (``network``)."""
    r, job = _job(locals())
    return r.explain(job)


def _job(a: dict) -> tuple:
    """The runner and the engine's job for the arguments ``a`` of
    :func:`fit` or :func:`explain`."""
    valid = a["valid"]
    if isinstance(valid, bool):
        raise TypeError("valid: expected a fraction, a table or a path")
    if isinstance(valid, (int, float)):
        valid_source, fraction = None, float(valid)
    else:
        valid_source, fraction = to_source(valid, "valid"), 0.2
    features, categorical, shrinkage = a["features"], a["categorical"], a["shrinkage"]
    job = dict(
        data=to_source(a["data"]),
        by=key_list(a["by"]),
        target=a["target"],
        valid=valid_source,
        valid_fraction=fraction,
        features=None if features is None else key_list(features),
        categorical=None if categorical is None else key_list(categorical),
        max_categories=_count("max_categories", a["max_categories"]),
        task=a["task"],
        model=a["model"],
        params=grid_specs(a["params"]),
        min_rows=_count("min_rows", a["min_rows"]),
        threads=_count("threads", a["threads"]),
        seed=_count("seed", a["seed"]),
        strategy=a["strategy"],
        global_model=bool(a["global_model"]),
        hierarchy=bool(a["hierarchy"]),
        shrinkage=None if shrinkage is None else str(shrinkage),
        max_memory=a["max_memory"],
    )
    return resolve_runner(a["runner"]), job


def _call(a: dict) -> str:
    """How the job was asked for, for reports: ``groupfit.fit(...)`` with
    the arguments given other than their defaults (tables by type)."""
    sig = fit.__defaults__ or ()
    names = fit.__code__.co_varnames[: fit.__code__.co_argcount]
    defaults = dict(zip(names[len(names) - len(sig):], sig))
    parts = []
    for name in names:
        value = a.get(name)
        if name in _NOT_IN_CALL or (name in defaults and _same(value, defaults[name])):
            continue
        if isinstance(value, (str, os.PathLike, int, float, bool, type(None), list, tuple, dict)):
            shown = repr(os.fspath(value) if isinstance(value, os.PathLike) else value)
        else:
            shown = f"<{type(value).__module__.split('.')[0]}.{type(value).__name__}>"
        parts.append(f"{name}={shown}")
    return f"groupfit.fit({', '.join(parts)})"


#: Arguments that do not change the models, left out of the shown call.
_NOT_IN_CALL = ("progress", "callback")


def _same(a: Any, b: Any) -> bool:
    """Whether ``a`` is the default ``b`` (tables are never compared)."""
    if a is b:
        return True
    if type(a) is not type(b) or not isinstance(a, (str, int, float, bool)):
        return False
    return a == b


def _count(name: str, value: Any) -> int:
    """``value`` as a non-negative integer that fits the engine's 64 bits."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{name}: expected an integer, got {type(value).__name__}")
    if not 0 <= int(value) < 2**64:
        raise ArgumentError(f"{name} must be a non-negative integer, got {value}")
    return int(value)
