"""Runners: where the passes over the data run.

``fit(..., runner=...)`` picks one: an instance of :class:`Runner`, a name
(``"native"``, ``"ray"``), or ``None``, which reads the ``GROUPFIT_RUNNER``
environment variable and defaults to ``"native"``.

- :class:`NativeRunner`: the engine in this process, its own threads.
- :class:`RayRunner`: Ray actors, each holding a shard of the data; see
  :mod:`groupfit.ray_runner`. Ray is imported only when this runner runs.

A runner returns the engine's trained bundle (``_native.Bundle``);
:func:`groupfit.fit` wraps it in a :class:`groupfit.GroupedModel` together with
the runner's :attr:`Runner.last_info`. This module imports nothing of the
package above the engine, so ``_model`` can import it and not the reverse.
"""

from __future__ import annotations

import json
import os
from typing import Any, Optional

from groupfit import _native
from groupfit.exceptions import ArgumentError


class Runner:
    """Base class: runs a training job (the keyword arguments of the engine's
    ``train``) and returns the engine's trained bundle (``_native.Bundle``).
    The job's ``progress`` is the callable that takes its progress events
    ``(stage, done, total, models_done, models)``.

    After :meth:`fit`, ``last_info`` holds what the run reports beyond the
    bundle's summary (``GroupedModel.runner_info``): empty for the native
    runner, the actors' passes, seconds and restarts for the Ray runner.
    """

    name = "runner"

    def fit(self, job: dict) -> "_native.Bundle":  # pragma: no cover - abstract
        """Runs the training job; returns the trained bundle and sets ``last_info``."""
        raise NotImplementedError

    def explain(self, job: dict) -> dict:  # pragma: no cover - abstract
        """The plans this runner would run for the job, priced, nothing
        trained: ``groupfit explain --json`` as a dict."""
        raise NotImplementedError


class NativeRunner(Runner):
    """Trains in this process with the engine's own threads (``threads`` of the job)."""

    name = "native"

    def fit(self, job: dict) -> "_native.Bundle":
        job = dict(job)
        data = job.pop("data")
        by = job.pop("by")
        target = job.pop("target")
        bundle = _native.train(data, by, target, **job)
        self.last_info: dict = {}
        return bundle

    def explain(self, job: dict) -> dict:
        job = dict(job)
        data, by, target = job.pop("data"), job.pop("by"), job.pop("target")
        return json.loads(_native.explain(data, by, target, **job))


class RayRunner(Runner):
    """Trains on Ray actors: ``workers`` actors with ``cpus_per_worker`` CPUs each.

    The planner places the groups: whole on one actor, or cut over several
    (``strategy``: ``auto`` picks the cheapest of ``tp``, ``fused`` and
    ``hybrid``, priced with the network it measures at the start of a run).
    Each actor runs the engine's partial steps on its pieces, and the driver
    combines the partial statistics of cut groups and broadcasts them. With
    categorical features, groups go whole: each actor fits its groups with
    the native engine.
    ``max_restarts``: how many times a failed actor is replaced (its shard
    reloaded, training resumed from the last completed pass; for whole groups,
    its shard fitted again) before the run fails with
    :class:`groupfit.exceptions.RunnerError`.
    ``address``: passed to ``ray.init`` when Ray is not initialised yet (``None``
    starts a local Ray).
    """

    name = "ray"

    def __init__(
        self,
        workers: int = 2,
        cpus_per_worker: int = 1,
        max_restarts: int = 1,
        address: Optional[str] = None,
        fault_hook: Any = None,
    ):
        if workers < 1:
            raise ArgumentError(f"RayRunner: workers must be at least 1, got {workers}")
        self.workers = int(workers)
        self.cpus_per_worker = int(cpus_per_worker)
        self.max_restarts = int(max_restarts)
        self.address = address
        #: Test hook: ``fault_hook(pass_index, actors)`` is called before every pass.
        self.fault_hook = fault_hook

    def fit(self, job: dict) -> "_native.Bundle":
        from groupfit.ray_runner import fit_on_ray

        return fit_on_ray(self, job)

    def explain(self, job: dict) -> dict:
        """The one-stage plans (``tp``, ``fused``, ``hybrid``) of ``workers``
        actors, priced with the family's pilot on a sample and the network
        measured to fresh actors (round trip and bytes per second)."""
        from groupfit.ray_runner import explain_on_ray

        return explain_on_ray(self, job)


RUNNERS = {"native": NativeRunner, "ray": RayRunner}


def resolve_runner(runner: Any = None) -> Runner:
    """The runner for a ``runner=`` argument (see the module docs)."""
    where = ""
    if runner is None:
        runner = os.environ.get("GROUPFIT_RUNNER") or "native"
        where = " in GROUPFIT_RUNNER"
    if isinstance(runner, Runner):
        return runner
    if isinstance(runner, str):
        try:
            return RUNNERS[runner.strip().lower()]()
        except KeyError:
            raise ArgumentError(
                f"unknown runner '{runner}'{where} (available: {', '.join(RUNNERS)})"
            ) from None
    raise TypeError(f"runner: expected a name or a Runner, got {type(runner).__name__}")
