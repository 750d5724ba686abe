"""groupfit: GROUP BY for machine-learning training.

>>> import groupfit as gf
>>> model = gf.fit(df, by=["origin", "dest"], target="arr_delay",
...                params={"C": [0.01, 0.1, 1, 10]}, valid=0.2)   # doctest: +SKIP
>>> model.summary, model.scores, model.predict(df2)                # doctest: +SKIP

See :func:`fit`, :class:`GroupedModel`, :func:`load`, :class:`GroupedEstimator`
and :mod:`groupfit.runners`.
"""

from groupfit import exceptions
from groupfit._model import GroupedModel, fit, load
from groupfit._native import version as _engine_version
from groupfit.estimator import GroupedEstimator
from groupfit.runners import NativeRunner, RayRunner, Runner

__version__ = _engine_version()

__all__ = [
    "fit",
    "load",
    "GroupedModel",
    "GroupedEstimator",
    "Runner",
    "NativeRunner",
    "RayRunner",
    "exceptions",
    "__version__",
]
