"""groupfit: GROUP BY for machine-learning training.

>>> import groupfit as gf
>>> model = gf.fit(df, by=["origin", "dest"], target="arr_delay",
...                params={"C": [0.01, 0.1, 1, 10]}, valid=0.2)   # doctest: +SKIP
>>> model.summary, model.scores, model.predict(df2)                # doctest: +SKIP

See :func:`fit`, :class:`GroupedModel`, :func:`load`, :mod:`groupfit.runners`
and the scikit-learn estimators :class:`GroupedRegressor`, :class:`GroupedClassifier`
and :class:`GroupedEstimator` (imported when first used: they need scikit-learn).
"""

from groupfit import exceptions
from groupfit._model import GroupedModel, explain, fit, load
from groupfit._native import version as _engine_version
from groupfit.runners import NativeRunner, RayRunner, Runner

__version__ = _engine_version()

__all__ = [
    "fit",
    "explain",
    "load",
    "GroupedModel",
    "GroupedEstimator",
    "GroupedRegressor",
    "GroupedClassifier",
    "Runner",
    "NativeRunner",
    "RayRunner",
    "exceptions",
    "__version__",
]

_ESTIMATORS = ("GroupedEstimator", "GroupedRegressor", "GroupedClassifier")


def __getattr__(name: str):
    # The estimators import scikit-learn; `import groupfit` does not need it.
    if name in _ESTIMATORS:
        try:
            from groupfit import estimator
        except ImportError as e:
            raise ImportError(
                f"groupfit.{name} needs scikit-learn: pip install 'groupfit[sklearn]' ({e})"
            ) from e
        return getattr(estimator, name)
    raise AttributeError(f"module 'groupfit' has no attribute {name!r}")
