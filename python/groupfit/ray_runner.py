"""The Ray runner's driver: actors holding shards, passes of partial steps.

Imported only when ``runner="ray"`` runs (it imports ``ray``).

The engine prepares the data (reading, group encoding, the split, fallbacks)
as for the native runner, then calls :class:`_Driver` with one shard per
worker, placed by ``remote::place`` (small groups whole on one worker,
large groups and the global model's rows cut into one block-aligned piece per
worker). The driver:

1. starts one actor per shard (``num_cpus=cpus_per_worker``, spread over the
   cluster's nodes) and gives it its shard: for a Parquet input, the file and
   the row numbers, and the actor reads its rows itself, its validation rows
   too (every node must see the files at their paths: a shared file system);
   for in-memory input, the rows as Arrow through the object store;
2. runs the family's rounds of group statistics (linear: counts and sums,
   then squared deviations), so every shard is prepared with its whole
   group's statistics, and has every actor build its layout;
3. runs passes: every actor accumulates its units over its shard and updates
   whole groups locally (``step``); the driver combines the partial statistics
   of shared groups in row order (``Coordinator.combine``) and broadcasts them;
   every actor updates its replicas (``apply``) and puts a snapshot of its
   units in the object store (the driver keeps only the reference);
4. hands each worker's models to the engine, one worker at a time, then
   ends the actors.

Categorical features: groups are placed whole, largest first to the
least-loaded actor (the global model, fitted on every row, is one such unit),
and each actor fits its shard with the native engine (``fit_whole``); a dead
actor's shard is fitted again by its replacement.

A dead actor is replaced: the new actor reloads the shard (from the file or
the object store), rebuilds its layout, restores the snapshot of the last completed pass
and redoes the pass. An actor that fails more than ``max_restarts`` times
fails the run with :class:`groupfit.exceptions.RunnerError`.
"""

from __future__ import annotations

import contextlib
import json
import time
from typing import Any, Callable, List, Optional

import ray
from ray.exceptions import RayActorError

from groupfit import _native
from groupfit.exceptions import GroupfitError, RunnerError


@ray.remote
class ShardWorker:
    """One Ray actor: a ``_native.WorkerSession`` over its shard."""

    def __init__(self):
        self.session = None
        self.busy = 0.0

    def load(self, spec: str, shard: Any, valid: Any, threads: int = 1) -> None:
        """Takes the shard and its spec: the rows as Arrow (from the object
        store), or, for a Parquet input, where to read them (``path``, the
        ``target`` and ``features`` columns, file ``rows``): the actor reads
        its own rows, and the driver never holds the training features.
        ``valid``: its pieces' validation rows (Arrow), or for a Parquet
        input where to read their features (``path``, file ``rows``, with
        their ``piece`` and ``target``)."""
        if isinstance(shard, dict):
            self.session = self._timed(
                _native.WorkerSession.from_parquet,
                spec,
                shard["path"],
                shard["target"],
                shard["features"],
                shard["rows"],
                valid,
                threads,
            )
        else:
            self.session = self._timed(_native.WorkerSession, spec, shard, valid)

    def _timed(self, f: Callable, *args):
        t = time.perf_counter()
        out = f(*args)
        self.busy += time.perf_counter() - t
        return out

    def statistics(self, round: int, agreed: bytes) -> bytes:
        return self._timed(self.session.statistics, round, agreed)

    def prepare(self, agreed: bytes, snapshot: Optional[bytes] = None) -> None:
        self._timed(self.session.prepare, agreed)
        if snapshot is not None:
            self.session.restore(snapshot)

    def step(self) -> bytes:
        return self._timed(self.session.step)

    @ray.method(num_returns=2)
    def apply(self, combined: bytes):
        """Updates the units; returns whether any is active and the
        snapshot of the units (kept in the object store: the driver holds
        only its reference, to restore a replacement actor)."""
        active = self._timed(self.session.apply, combined)
        return active, self.session.snapshot()

    def active(self) -> int:
        """Units still active here."""
        return self.session.active()

    def models(self) -> bytes:
        return self.session.models()

    def fit_whole(self, spec: str, train: Any, valid: Any, threads: int = 1) -> bytes:
        """Fits a whole-group shard (trees, networks): no state is kept."""
        return self._timed(_native.fit_whole, spec, train, valid, threads)

    def compute_seconds(self) -> float:
        return self.busy

    def echo(self, payload: Any = None) -> int:
        """A round trip for the driver's network measurement: the
        payload's length (0 without one)."""
        return 0 if payload is None else len(payload)


def _nbytes(part: Any) -> int:
    """Bytes of a shipped part: an Arrow batch, or where to read the rows
    (a dict whose bytes values are row lists and targets)."""
    if isinstance(part, dict):
        return sum(len(v) for v in part.values() if isinstance(v, bytes))
    return part.nbytes


class _Driver:
    """Called by the engine with the shards; returns the fitted units."""

    def __init__(self, runner: Any):
        self.runner = runner
        self.info: dict = {}
        # Per worker, its shard and validation rows in the object store.
        self.refs: list = []
        # Actors start now, while the engine reads and prepares the data.
        self.actors: list = [self._new_actor() for _ in range(runner.workers)]

    def _new_actor(self):
        opts = dict(num_cpus=self.runner.cpus_per_worker, scheduling_strategy="SPREAD")
        return ShardWorker.options(**opts).remote()

    def _start(self, i: int):
        a = self.actors[i] if i < len(self.actors) and self.actors[i] is not None else self._new_actor()
        shard, valid = self.refs[i]
        self.loads[i] = a.load.remote(self.specs[i], shard, valid, max(1, int(self.runner.cpus_per_worker)))
        return a

    def network(self) -> tuple:
        """The network to the actors, measured once per run: ``(round trip
        in microseconds, bytes per second)``. The round trip is the median
        of 9 empty calls per actor (after one that waits for it to start);
        the bandwidth, the best of 3 sends of 4 MiB less a round trip."""
        if getattr(self, "measured", None) is not None:
            return self.measured
        ray.get([a.echo.remote() for a in self.actors])
        trips = []
        for a in self.actors:
            for _ in range(9):
                t = time.perf_counter()
                ray.get(a.echo.remote())
                trips.append(time.perf_counter() - t)
        rtt = sorted(trips)[len(trips) // 2]
        payload = bytes(4 << 20)
        best = float("inf")
        for _ in range(3):
            t = time.perf_counter()
            ray.get(self.actors[0].echo.remote(payload))
            best = min(best, time.perf_counter() - t)
        bytes_per_s = len(payload) / max(best - rtt, 1e-6)
        self.measured = (rtt * 1e6, bytes_per_s)
        self.info["network"] = {"rtt_us": rtt * 1e6, "bytes_per_s": bytes_per_s}
        return self.measured

    def close(self) -> None:
        """Ends every actor and lets the shards go."""
        for a in self.actors:
            if a is not None:
                ray.kill(a)
        self.actors = []
        self.refs = []

    def _count_restart(self, i: int, error: Exception) -> None:
        """Counts a failure of worker ``i``; past ``max_restarts``, fails the run."""
        self.restarts[i] += 1
        if self.restarts[i] > self.runner.max_restarts:
            raise RunnerError(
                f"Ray worker {i} failed {self.restarts[i]} times "
                f"(max_restarts={self.runner.max_restarts}); last error: "
                f"{type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}"
            ) from error

    def _replace(self, i: int, error: Exception) -> None:
        self._count_restart(i, error)
        self.actors[i] = None
        self.actors[i] = self._start(i)
        self.info.setdefault("restarts", []).append({"worker": i, "pass": self.passes})
        if self.prepared:
            ray.get(self.actors[i].prepare.remote(self.std, self.snapshots[i]))

    def _round(
        self,
        call: Callable[[int, Any], Any],
        redo: Optional[Callable[[int], None]] = None,
        replace: Optional[Callable[[int, Exception], None]] = None,
    ) -> List[Any]:
        """Runs ``call(i, actor)`` on every actor; replaces a dead one
        (``replace``, by default with its shard reloaded) and retries."""
        replace = replace or self._replace
        n = len(self.actors)
        pending = {i: call(i, self.actors[i]) for i in range(n)}
        out: List[Any] = [None] * n
        while pending:
            i, ref = next(iter(pending.items()))
            try:
                out[i] = ray.get(ref)
                del pending[i]
            except RayActorError as e:
                replace(i, e)
                if redo is not None:
                    redo(i)
                pending[i] = call(i, self.actors[i])
        return out

    @staticmethod
    @contextlib.contextmanager
    def _engine_errors():
        """An engine error inside an actor (an infinite value in its rows, an
        unreadable file) is raised as the engine's own exception, with its
        one-line message, not wrapped in Ray's."""
        try:
            yield
        except ray.exceptions.RayTaskError as e:
            cause = getattr(e, "cause", None)
            if isinstance(cause, GroupfitError):
                raise cause from None
            raise

    def __call__(self, shards: list) -> dict:
        self.specs = [s for s, _, _ in shards]
        # Parquet input: actors read their own rows (see ShardWorker.load).
        self.info["shards_from"] = "parquet" if all(isinstance(b, dict) for _, b, _ in shards) else "arrow"
        self.info["shard_bytes_sent"] = sum(_nbytes(b) + _nbytes(v) for _, b, v in shards)
        self.refs = [(ray.put(b), ray.put(v)) for _, b, v in shards]
        # The rows are in the object store now: free the driver's copies
        # (the list is the engine's, alive until this call returns).
        shards.clear()
        try:
            with self._engine_errors():
                return self._run()
        except BaseException:
            self.close()
            raise

    def models(self, i: int) -> bytes:
        """Worker ``i``'s models, after the passes (the engine takes them
        one worker at a time, so the driver never holds all of them as
        bytes). A dead actor is replaced and restored from its last
        snapshot first."""
        while True:
            try:
                with self._engine_errors():
                    return ray.get(self.actors[i].models.remote())
            except RayActorError as e:
                self._replace(i, e)

    def fit_whole(self, shards: list) -> List[bytes]:
        """Whole groups per actor (families without a remote partial step):
        each actor fits its shard with the native engine. A dead actor is
        replaced and its shard fitted again from the start."""
        t0 = time.perf_counter()
        n = len(shards)
        specs = [s for s, _, _ in shards]
        refs = [(ray.put(t), ray.put(v)) for _, t, v in shards]
        rows = [t.num_rows for _, t, _ in shards]
        shards.clear()  # in the object store now: free the driver's copies
        self.restarts = [0] * n
        self.passes = 0
        self.prepared = False
        threads = max(1, int(self.runner.cpus_per_worker))
        spare = self.actors[n:]
        self.actors = [self.actors[i] if i < len(self.actors) else self._new_actor() for i in range(n)]
        for a in spare:
            ray.kill(a)
        hook = self.runner.fault_hook
        if hook is not None:
            hook(0, list(self.actors))

        def call(i, a):
            return a.fit_whole.remote(specs[i], refs[i][0], refs[i][1], threads)

        def replace(i, error):
            self._count_restart(i, error)
            self.actors[i] = self._new_actor()
            self.info.setdefault("restarts", []).append({"worker": i, "pass": 0})

        try:
            with self._engine_errors():
                out = self._round(call, replace=replace)
                compute = [ray.get(a.compute_seconds.remote()) for a in self.actors]
        finally:
            self.close()
        wall = time.perf_counter() - t0
        self.info.update(
            runner="ray",
            workers=n,
            placement="whole groups",
            passes_s=wall,
            setup_s=0.0,
            compute_s=max(compute),
            compute_s_per_worker=compute,
            comm_s=max(0.0, wall - max(compute)),
            shard_rows=rows,
            shared_groups=0,
            shards_from="arrow",
            restarts=self.info.get("restarts", []),
        )
        return out

    def _run(self) -> dict:
        t_start = time.perf_counter()
        n = len(self.specs)
        self.restarts = [0] * n
        # Per worker, the reference of its last snapshot (in the object store).
        self.snapshots: List[Any] = [None] * n
        self.std: Optional[bytes] = None
        self.prepared = False
        self.passes = 0
        spare = self.actors[n:]
        self.loads: List[Any] = [None] * n
        self.actors = [self._start(i) for i in range(n)]
        for a in spare:
            ray.kill(a)
        self._round(lambda i, a: self.loads[i])
        coord = _native.Coordinator(self.specs)
        # The family's statistics rounds: what every piece needs of its whole group.
        self.std = b""
        for r in range(coord.rounds):
            agreed = self.std
            self.std = coord.reduce(self._round(lambda i, a: a.statistics.remote(r, agreed)))
        self._round(lambda i, a: a.prepare.remote(self.std))
        self.prepared = True
        t_setup = time.perf_counter() - t_start
        # Progress: the units (a cut group's once per piece) that stopped.
        progress = getattr(self, "progress", None)
        units = sum(self._round(lambda i, a: a.active.remote())) if progress else 0
        # Passes.
        t0 = time.perf_counter()
        active = [1] * n
        hook = self.runner.fault_hook
        while any(active):
            if hook is not None:
                hook(self.passes, list(self.actors))
            parts = self._round(lambda i, a: a.step.remote())
            combined = coord.combine(parts)
            snapshots: List[Any] = [None] * n

            def apply(i, a):
                ref, snapshots[i] = a.apply.remote(combined)
                return ref

            # A worker replaced here restarted from the last snapshot: redo its step first.
            active = self._round(apply, redo=lambda i: ray.get(self.actors[i].step.remote()))
            self.snapshots = snapshots
            self.passes += 1
            if progress:
                progress("training", float(units - sum(active)), float(units), 0, 0)
        passes_s = time.perf_counter() - t0
        compute = self._round(lambda i, a: a.compute_seconds.remote())
        pieces = [json.loads(s)["pieces"] for s in self.specs]
        self.info["model"] = json.loads(self.specs[0])["model"]
        self.info.update(
            runner="ray",
            workers=n,
            placement="pieces",
            passes=self.passes,
            setup_s=t_setup,
            passes_s=passes_s,
            # Seconds of the slowest actor inside the engine (statistics, layout,
            # passes); the rest of setup + passes is scheduling, transfer and
            # (de)serialisation: communication.
            compute_s=max(compute),
            compute_s_per_worker=compute,
            shard_rows=[sum(p["rows"] for p in ps) for ps in pieces],
            shared_groups=len({p["group"] for ps in pieces for p in ps if p["shared"]}),
            restarts=self.info.get("restarts", []),
        )
        self.info["comm_s"] = max(0.0, t_setup + passes_s - self.info["compute_s"])
        return {
            "impute": coord.impute(),
            "passes": self.passes,
            "passes_s": passes_s,
        }


def _connect(runner: Any) -> None:
    if not ray.is_initialized():
        ray.init(address=runner.address, include_dashboard=False, log_to_driver=False)


def explain_on_ray(runner: Any, job: dict) -> dict:
    """The Ray runner's plans of a job, priced with the network measured to
    ``runner.workers`` fresh actors; nothing trained (see ``RayRunner.explain``)."""
    _connect(runner)
    driver = _Driver(runner)
    job = dict(job)
    data, by, target = job.pop("data"), job.pop("by"), job.pop("target")
    try:
        network = driver.network()
    finally:
        driver.close()
    return json.loads(
        _native.explain(data, by, target, network=network, remote_workers=runner.workers, **job)
    )


def fit_on_ray(runner: Any, job: dict) -> "_native.Bundle":
    """Runs a training job with ``runner`` (a :class:`groupfit.runners.RayRunner`);
    returns the trained bundle and sets ``runner.last_info`` to the driver's
    report (what ``GroupedModel.runner_info`` shows)."""
    _connect(runner)
    driver = _Driver(runner)
    job = dict(job)
    driver.progress = job.get("progress")
    data = job.pop("data")
    by = job.pop("by")
    target = job.pop("target")
    try:
        bundle = _native.train(data, by, target, remote=driver, remote_workers=runner.workers, **job)
    finally:
        driver.close()
    runner.last_info = dict(driver.info)
    return bundle
