"""Exceptions raised by groupfit.

Every engine error arrives as one of these classes with the engine's one-line
message, the same text the CLI prints after ``error: ``. All derive from
:class:`GroupfitError`.

- :class:`DataError`: the input cannot be used.
  Subclasses: :class:`MissingColumnError`, :class:`NonNumericColumnError`,
  :class:`ColumnTypeError` (a column typed otherwise than in training),
  :class:`TooManyCategoriesError` (a categorical column over ``max_categories``),
  :class:`InfiniteValueError`, :class:`EmptyInputError`, :class:`TargetError`,
  :class:`NoModelError` (rows to predict whose group has no model: trained
  with ``global_model=False``).
- :class:`ParamError`: an invalid hyper-parameter or grid.
- :class:`ArgumentError`: an invalid or conflicting argument.
- :class:`ModelFileError`: a corrupt, truncated or too-new model file.
- :class:`MemoryLimitError`: a training job whose estimated peak memory is
  more than the memory available (or ``max_memory``), refused before its
  features are read.
- :class:`FileError`: a file cannot be read or written, or is not readable Parquet or CSV.
- :class:`RunnerError`: a distributed runner failed (e.g. a worker died again
  after being replaced).
"""

from groupfit._native import (
    ArgumentError,
    ColumnTypeError,
    DataError,
    EmptyInputError,
    FileError,
    GroupfitError,
    InfiniteValueError,
    MemoryLimitError,
    MissingColumnError,
    ModelFileError,
    NoModelError,
    NonNumericColumnError,
    ParamError,
    RunnerError,
    TargetError,
    TooManyCategoriesError,
)

__all__ = [
    "GroupfitError",
    "DataError",
    "MissingColumnError",
    "NonNumericColumnError",
    "ColumnTypeError",
    "TooManyCategoriesError",
    "InfiniteValueError",
    "EmptyInputError",
    "TargetError",
    "NoModelError",
    "ParamError",
    "ArgumentError",
    "ModelFileError",
    "MemoryLimitError",
    "FileError",
    "RunnerError",
]

# The classes are defined by the extension module; naming this module as
# theirs lets pickle find them (an engine error raised in a Ray actor or a
# joblib worker arrives as the same class).
for _name in __all__:
    globals()[_name].__module__ = __name__
del _name
