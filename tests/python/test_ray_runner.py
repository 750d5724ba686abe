"""The Ray runner on a real multi-node Ray cluster simulated on this machine
(ray.cluster_utils.Cluster, 2 nodes): the same models as the native runner,
groups cut across actors for every family, whole groups per actor with
categorical features, an actor killed mid-training replaced and training
resumed, a repeated fault failing with a clear error."""

from __future__ import annotations

import json
import time

import numpy as np
import pyarrow as pa
import pyarrow.compute  # noqa: F401  (pa.compute)
import pyarrow.parquet as pq
import pytest

# Ray is a declared test dependency (requirements-dev.txt, the `test` extra):
# without it this module fails to import and the suite fails; it is never skipped.
import ray
from ray.cluster_utils import Cluster

import groupfit as gf
from groupfit import exceptions as gfe
from conftest import make_grouped

# One binary group large enough for the sampled Hessian (>= 48 blocks of 256
# rows) and to be sharded, mid-size and small groups, and one below min_rows.
SIZES = {"big": 16000, "mid": 2600, "m2": 900, "s1": 120, "s2": 60, "s3": 35, "tiny": 4}


# The hybrid plan on 3 actors cuts the big group and the global model's
# rows (each holds over a third of the rows): the tests that check pieces
# ask for it; `auto` prices the network and may keep them whole.
CUT = dict(strategy="hybrid")


@pytest.fixture(scope="module")
def cluster():
    c = Cluster(initialize_head=True, head_node_args={"num_cpus": 2, "include_dashboard": False})
    c.add_node(num_cpus=1)
    c.wait_for_nodes()
    ray.init(address=c.address, log_to_driver=False)
    try:
        assert len([n for n in ray.nodes() if n["Alive"]]) == 2
        yield c
    finally:
        ray.shutdown()
        c.shutdown()


def data(task: str, seed: int):
    cols, _ = make_grouped(seed, SIZES, d=4, task=task)
    n = len(cols["y"])
    cols["f2"] = np.where(np.arange(n) % 23 == 0, np.nan, cols["f2"])
    train = pa.table(cols)
    vcols, _ = make_grouped(seed + 1, {k: max(v // 4, 2) for k, v in SIZES.items()}, d=4, task=task)
    return train, pa.table(vcols)


def assert_same(native, remote, valid, rtol=1e-7, atol=None):
    # rtol: float64 families agree to 1e-7; the float32 networks train with
    # their summation order set by the thread count (the engine's own plan and
    # thread invariance test allows 1e-4 on weights), so they get 1e-5 here.
    atol = rtol * 1e-2 if atol is None else atol
    np.testing.assert_allclose(remote.predict(valid), native.predict(valid), rtol=rtol, atol=atol)
    ns, rs = native.summary, remote.summary
    for k in ("groups", "models", "routes", "fallback", "chosen_configs", "global_config", "rows_train"):
        assert rs[k] == ns[k], k
    for k in ("valid_logloss", "valid_auc", "valid_rmse"):
        if k in ns:
            assert rs[k] == pytest.approx(ns[k], rel=rtol), k
    assert remote.scores.drop_columns([c for c in remote.scores.column_names if c.startswith("valid_")]).equals(
        native.scores.drop_columns([c for c in native.scores.column_names if c.startswith("valid_")])
    )


@pytest.mark.parametrize("task", ["binary", "regression"])
def test_ray_equals_native(cluster, task):
    train, valid = data(task, 21 if task == "binary" else 31)
    kw = dict(by="g", target="y", params={"C": [0.1, 10.0]}, valid=valid, min_rows=10, **CUT)
    native = gf.fit(train, **kw)
    runner = gf.RayRunner(workers=3)
    events = []
    remote = gf.fit(train, runner=runner, callback=lambda *e: events.append(e), **kw)
    assert_same(native, remote, valid)
    # The driver sends the training events, after each pass (the callback
    # gets those that changed): units stop over several passes.
    training = [e for e in events if e[0] == "training"]
    assert len(training) >= 2 and training[0][1] < training[-1][1] == training[-1][2]
    assert [e[1] for e in events] == sorted(e[1] for e in events)
    assert events[-1][0] == "scoring" and events[-1][1] == events[-1][2] > 0
    info = remote.runner_info
    assert info["runner"] == "ray" and info["workers"] == 3 and info["restarts"] == []
    # the big group and the global model's rows are cut over both actors
    assert info["shared_groups"] >= 2
    assert remote.summary["cut_groups"] == info["shared_groups"]
    assert min(info["shard_rows"]) > 0.3 * sum(info["shard_rows"]) / 3
    assert remote.summary["strategy"] == "hybrid"
    assert info["passes"] == remote.summary["passes"] >= 2


def test_auto_prices_the_plans_with_the_measured_network(cluster, tmp_path, monkeypatch):
    # auto: the cheapest one-stage plan under the pilot's costs and the
    # network measured to the actors; the driver reports what it measured,
    # keeps it for the CLI (network.json), and the models are the native ones.
    monkeypatch.setenv("GROUPFIT_CACHE_DIR", str(tmp_path))
    train, valid = data("binary", 23)
    kw = dict(by="g", target="y", params={"C": [0.1, 10.0]}, valid=valid, min_rows=10)
    native = gf.fit(train, **kw)
    remote = gf.fit(train, runner=gf.RayRunner(workers=3), **kw)
    assert_same(native, remote, valid)
    net = remote.runner_info["network"]
    assert 0 < net["rtt_us"] < 1e6 and net["bytes_per_s"] > 1e6
    assert remote.summary["strategy"] in ("tp", "fused", "hybrid")
    kept = json.loads((tmp_path / "network.json").read_text())
    assert kept["network"] == {"rtt_us": net["rtt_us"], "bytes_per_s": net["bytes_per_s"]}
    # RayRunner.explain: the same plans, priced, nothing trained
    e = gf.explain(train, runner=gf.RayRunner(workers=3), **kw)
    assert e["runner"] == "ray" and e["workers"] == 3 and e["network"]["source"] == "measured"
    assert [s["strategy"] for s in e["strategies"]] == ["tp", "fused", "hybrid"]
    assert e["calibration"]["stage_us"] > 2 * e["network"]["rtt_us"]
    best = min(s["pass_s"] for s in e["strategies"])
    assert e["auto"] in [s["strategy"] for s in e["strategies"] if s["pass_s"] <= best * 1.005]
    assert gf.explain(train, **kw)["runner"] == "native"
    # dp reduces a group per stage: not a plan of remote workers
    with pytest.raises(gfe.ArgumentError, match="strategy 'dp' runs a stage per group"):
        gf.fit(train, runner=gf.RayRunner(workers=3), **{**kw, "strategy": "dp"})


def test_runner_from_environment(cluster, monkeypatch):
    train, valid = data("binary", 41)
    monkeypatch.setenv("GROUPFIT_RUNNER", "ray")
    remote = gf.fit(train, by="g", target="y", valid=valid)
    assert remote.runner_info["runner"] == "ray"
    assert_same(gf.fit(train, by="g", target="y", valid=valid, runner="native"), remote, valid)


def test_killed_actor_is_replaced_and_training_resumes(cluster):
    train, valid = data("binary", 51)
    kw = dict(by="g", target="y", params={"C": [0.1, 10.0]}, valid=valid, **CUT)
    native = gf.fit(train, **kw)
    killed = []

    def kill_once(pass_index, actors):
        if pass_index == 3 and not killed:
            ray.kill(actors[0])
            killed.append(pass_index)

    runner = gf.RayRunner(workers=3, max_restarts=1, fault_hook=kill_once)
    remote = gf.fit(train, runner=runner, **kw)
    assert killed == [3]
    assert remote.runner_info["restarts"] == [{"worker": 0, "pass": 3}]
    assert_same(native, remote, valid)
    # resumed, not restarted: as many passes as a run without the fault
    clean = gf.fit(train, runner=gf.RayRunner(workers=3), **kw)
    assert remote.summary["passes"] == clean.summary["passes"]


def test_actor_killed_after_the_passes_is_restored_from_its_snapshot(cluster, monkeypatch):
    # The driver takes each worker's models after the last pass. A worker
    # lost then is replaced and restored from its last snapshot, which the
    # object store holds: the models are the native ones, with no pass redone.
    from groupfit import ray_runner

    train, valid = data("binary", 59)
    kw = dict(by="g", target="y", model="gbdt", params=TREES, valid=valid, min_rows=10, seed=3, **CUT)
    native = gf.fit(train, **kw)
    take = ray_runner._Driver.models
    killed = []

    def kill_then_take(self, i):
        if i == 1 and not killed:
            ray.kill(self.actors[1])
            killed.append(i)
            # the kill is asynchronous: wait until the actor is gone
            for _ in range(100):
                try:
                    ray.get(self.actors[1].compute_seconds.remote())
                except ray.exceptions.RayActorError:
                    break
                time.sleep(0.05)
        return take(self, i)

    monkeypatch.setattr(ray_runner._Driver, "models", kill_then_take)
    remote = gf.fit(train, runner=gf.RayRunner(workers=3), **kw)
    assert killed == [1] and remote.runner_info["shared_groups"] >= 1
    assert [r["worker"] for r in remote.runner_info["restarts"]] == [1]
    assert_same(native, remote, valid)


def test_repeated_fault_fails_clearly(cluster):
    train, valid = data("binary", 61)

    def kill_always(pass_index, actors):
        if pass_index >= 1:
            ray.kill(actors[1])

    runner = gf.RayRunner(workers=3, max_restarts=1, fault_hook=kill_always)
    with pytest.raises(gfe.RunnerError, match=r"Ray worker 1 failed 2 times \(max_restarts=1\)"):
        gf.fit(train, by="g", target="y", valid=valid, runner=runner)


def test_quantized_trees_are_placed_whole_from_parquet(cluster, tmp_path):
    # Quantized gradients take a scale from all of a group's rows: no remote
    # partial step. From a Parquet path the driver reads the features and
    # ships whole groups; the trees are the native ones, bit for bit.
    train, valid = data("binary", 43)
    tp, vp = str(tmp_path / "train.parquet"), str(tmp_path / "valid.parquet")
    pq.write_table(train, tp)
    pq.write_table(valid, vp)
    kw = dict(by="g", target="y", model="gbdt", params={**TREES, "use_quantized_grad": [True]}, valid=vp, min_rows=10)
    native = gf.fit(tp, **kw)
    remote = gf.fit(tp, runner=gf.RayRunner(workers=3), **kw)
    assert remote.runner_info["placement"] == "whole groups" and remote.summary["strategy"] == "tp"
    assert_same(native, remote, valid, rtol=0.0, atol=0.0)


def test_actors_read_their_own_parquet_rows(cluster, tmp_path):
    # A Parquet input: the driver reads the keys and the target, each actor
    # reads its rows' features from the file; the models are the native ones.
    train, valid = data("binary", 71)
    tp, vp = str(tmp_path / "train.parquet"), str(tmp_path / "valid.parquet")
    pq.write_table(train, tp, row_group_size=5000)
    pq.write_table(valid, vp)
    kw = dict(by="g", target="y", params={"C": [0.1, 10.0]}, min_rows=10)
    native = gf.fit(tp, valid=vp, **kw)
    remote = gf.fit(tp, valid=vp, runner=gf.RayRunner(workers=3), **kw)
    assert_same(native, remote, valid)
    info = remote.runner_info
    assert info["shards_from"] == "parquet"
    # what went to the actors is row numbers (4 bytes a row), not the rows
    assert info["shard_bytes_sent"] == 4 * sum(info["shard_rows"])
    # held-out validation rows of the same file: the driver reads only their features
    native = gf.fit(tp, valid=0.25, **kw)
    remote = gf.fit(tp, valid=0.25, runner=gf.RayRunner(workers=3), **kw)
    assert_same(native, remote, valid)
    # in-memory input still ships Arrow shards
    assert gf.fit(train, valid=valid, runner=gf.RayRunner(workers=3), **kw).runner_info["shards_from"] == "arrow"


def test_csv_input_is_read_by_the_driver(cluster, tmp_path):
    # A CSV input is read whole by the driver and shipped as Arrow shards.
    import pyarrow.csv as pacsv

    train, valid = data("binary", 75)
    tc = str(tmp_path / "train.csv")
    pacsv.write_csv(train, tc)
    kw = dict(by="g", target="y", valid=valid, min_rows=10)
    native = gf.fit(tc, **kw)
    remote = gf.fit(tc, runner=gf.RayRunner(workers=3), **kw)
    assert_same(native, remote, valid)
    assert remote.runner_info["shards_from"] == "arrow"


def test_infinite_value_read_by_an_actor_names_the_file_row(cluster, tmp_path):
    train, valid = data("regression", 81)
    f1 = train.column("f1").to_numpy().copy()
    f1[1234] = np.inf
    train = train.set_column(train.schema.get_field_index("f1"), "f1", pa.array(f1))
    tp, vp = str(tmp_path / "train.parquet"), str(tmp_path / "valid.parquet")
    pq.write_table(train, tp)
    pq.write_table(valid, vp)
    out = tmp_path / "m.gfm"
    with pytest.raises(gfe.InfiniteValueError) as e:
        gf.fit(tp, by="g", target="y", valid=vp, runner=gf.RayRunner(workers=3)).save(str(out))
    assert str(e.value) == f"column 'f1' in '{tp}' has an infinite value at row 1234"
    assert not out.exists()


TREES = {"rounds": [12], "num_leaves": [4, 7], "min_data_in_leaf": [5], "early_stopping_rounds": [3]}


@pytest.mark.parametrize("task", ["binary", "regression"])
def test_gbdt_cut_over_actors_equals_native(cluster, task):
    # The big group and the global model are cut over both actors: each holds
    # a piece, the histograms are reduced every pass, every holder applies
    # the same split; early stopping sees the group's validation rows.
    train, valid = data(task, 93)
    kw = dict(by="g", target="y", model="gbdt", params=TREES, valid=valid, min_rows=10, seed=3, **CUT)
    native = gf.fit(train, **kw)
    remote = gf.fit(train, runner=gf.RayRunner(workers=3), **kw)
    assert_same(native, remote, valid)
    info = remote.runner_info
    assert info["placement"] == "pieces" and info["model"] == "gbdt"
    assert info["shared_groups"] >= 2 and remote.summary["cut_groups"] == info["shared_groups"]
    assert info["passes"] > 12  # a pass is one histogram of the cut boosters


def test_gbdt_actors_read_their_own_validation_rows(cluster, tmp_path):
    # gbdt's early stopping needs each group's validation rows. From a
    # Parquet input the actors read those features too: the driver sends
    # file rows, pieces and targets (16 bytes a row), never the features.
    train, valid = data("binary", 95)
    tp, vp = str(tmp_path / "train.parquet"), str(tmp_path / "valid.parquet")
    pq.write_table(train, tp, row_group_size=5000)
    pq.write_table(valid, vp)
    kw = dict(by="g", target="y", model="gbdt", params=TREES, min_rows=10, seed=3, **CUT)
    for v in (vp, 0.25):  # a validation file, then rows held out of the training file
        native = gf.fit(tp, valid=v, **kw)
        remote = gf.fit(tp, valid=v, runner=gf.RayRunner(workers=3), **kw)
        assert_same(native, remote, valid)
        info = remote.runner_info
        assert info["shards_from"] == "parquet" and info["shared_groups"] >= 1
        sent, train_rows = info["shard_bytes_sent"], sum(info["shard_rows"])
        valid_rows = (sent - 4 * train_rows) / 16
        assert valid_rows == int(valid_rows) and valid_rows >= 1


def test_gbdt_actor_killed_mid_run_is_replaced(cluster):
    train, valid = data("binary", 97)
    kw = dict(by="g", target="y", model="gbdt", params=TREES, valid=valid, min_rows=10, **CUT)
    native = gf.fit(train, **kw)
    killed = []

    def kill_once(pass_index, actors):
        if pass_index == 5 and not killed:
            ray.kill(actors[0])
            killed.append(pass_index)

    remote = gf.fit(train, runner=gf.RayRunner(workers=3, max_restarts=1, fault_hook=kill_once), **kw)
    assert killed == [5] and remote.runner_info["restarts"] == [{"worker": 0, "pass": 5}]
    assert remote.runner_info["shared_groups"] >= 2
    assert_same(native, remote, valid)


NETS = {"hidden": [8], "lr": [0.01, 0.003], "epochs": [2], "batch_size": [32]}


@pytest.mark.parametrize("task", ["binary", "regression"])
def test_mlp_cut_over_actors_equals_native(cluster, task):
    # The big group and the global model are cut over both actors: each
    # step's batch is the native one, drawn over the whole group; each holder
    # sums the gradient over the members it holds, and all take the same step.
    train, valid = data(task, 99)
    kw = dict(by="g", target="y", model="mlp", params=NETS, valid=valid, min_rows=10, seed=3, **CUT)
    # Natively, whole groups (tp): one summation order whatever the load. A
    # priced native plan may cut a batch, and SGD can amplify the order's
    # rounding past any tolerance (see test_mlp_actor_killed_mid_run_is_replaced).
    native = gf.fit(train, **{**kw, "strategy": "tp"})
    remote = gf.fit(train, runner=gf.RayRunner(workers=3), **kw)
    # float32 networks: the gradient sums in another order (see assert_same),
    # so a prediction near 0 may differ by a few 1e-7.
    assert_same(native, remote, valid, rtol=1e-5, atol=1e-6)
    info = remote.runner_info
    assert info["placement"] == "pieces" and info["model"] == "mlp"
    assert info["shared_groups"] >= 2 and remote.summary["cut_groups"] == info["shared_groups"]


def test_mlp_actor_killed_mid_run_is_replaced(cluster):
    train, valid = data("regression", 101)
    kw = dict(by="g", target="y", model="mlp", params=NETS, valid=valid, min_rows=10, **CUT)
    # Compared with the same cut run without a fault: the same summation
    # order. On this data another order (a native plan cutting the big
    # group's batches in two) parts from it by 0.07 after about 750 steps:
    # a ReLU input near 0 takes the other side. See docs/families.md.
    uninterrupted = gf.fit(train, runner=gf.RayRunner(workers=3), **kw)
    killed = []

    def kill_once(pass_index, actors):
        if pass_index == 4 and not killed:
            ray.kill(actors[1])
            killed.append(pass_index)

    remote = gf.fit(train, runner=gf.RayRunner(workers=3, max_restarts=1, fault_hook=kill_once), **kw)
    assert killed == [4] and remote.runner_info["restarts"] == [{"worker": 1, "pass": 4}]
    assert remote.runner_info["shared_groups"] >= 2
    assert_same(uninterrupted, remote, valid, rtol=1e-7, atol=1e-9)


@pytest.mark.parametrize(
    "model,params",
    [
        ("linear", {"C": [0.1, 10.0]}),
        ("gbdt", {"rounds": [8], "num_leaves": [4, 7], "min_data_in_leaf": [5]}),
        ("mlp", NETS),
    ],
)
def test_without_the_global_model_ray_equals_native(cluster, model, params):
    # global_model=False: no family fits a global model; the 4-row group has
    # none. linear and mlp impute with the means over every training row: the
    # 4-row group's rows are placed for the statistics only.
    train, valid = data("binary", 41)
    train = train.set_column(train.column_names.index("f2"), "f2", pa.compute.if_else(pa.compute.equal(train["g"], "tiny"), 9.0, train["f2"]))
    kw = dict(by="g", target="y", model=model, params=params, valid=valid, min_rows=10, global_model=False)
    # Natively whole groups: one summation order whatever the load (mlp).
    native = gf.fit(train, strategy="tp", **kw)
    remote = gf.fit(train, runner=gf.RayRunner(workers=3), **kw)
    own = valid.filter(pa.compute.not_equal(valid["g"], "tiny"))
    tol = dict(rtol=1e-5, atol=1e-6) if model == "mlp" else {}
    assert_same(native, remote, own, **tol)
    assert remote.summary["global_config"] is None and remote.summary["routes"]["groups_none"] == 1
    with pytest.raises(gfe.NoModelError, match="group tiny"):
        remote.predict(valid)


def test_whole_group_actor_killed_is_replaced(cluster):
    # Categorical features go by whole groups; a dead actor's shard is fitted again.
    train, valid = data("regression", 95)
    train = train.append_column("shop", pa.array(["abc"[i % 3] for i in range(train.num_rows)]))
    valid = valid.append_column("shop", pa.array(["abc"[i % 3] for i in range(valid.num_rows)]))
    kw = dict(by="g", target="y", model="mlp", params={"hidden": [8], "epochs": [2]}, valid=valid)
    native = gf.fit(train, **kw)
    killed = []

    def kill_once(pass_index, actors):
        if not killed:
            ray.kill(actors[1])
            killed.append(pass_index)

    remote = gf.fit(train, runner=gf.RayRunner(workers=3, max_restarts=1, fault_hook=kill_once), **kw)
    assert killed == [0] and remote.runner_info["restarts"] == [{"worker": 1, "pass": 0}]
    assert_same(native, remote, valid, rtol=1e-5)


@pytest.mark.parametrize("model,params", [("linear", {"C": [0.1, 1.0]}), ("gbdt", {"rounds": [8], "num_leaves": [4]})])
def test_categorical_features_on_ray_equal_native(cluster, model, params):
    # Categorical features are coded by the driver and travel as codes in
    # whole-group shards, for every family (linear too). Missing values are
    # imputed by the means over every training row, whatever groups an
    # actor holds.
    train, valid = data("binary", 17)
    for t in ("train", "valid"):
        table = train if t == "train" else valid
        cat = pa.array(["abc"[i % 3] if i % 11 else None for i in range(table.num_rows)])
        table = table.append_column("shop", cat)
        if t == "train":
            train = table
        else:
            valid = table
    kw = dict(by="g", target="y", model=model, params=params, valid=valid, min_rows=10, seed=3)
    native = gf.fit(train, **kw)
    assert native.summary["categorical"] == {"shop": 3}
    remote = gf.fit(train, runner=gf.RayRunner(workers=3), **kw)
    assert_same(native, remote, valid)
    assert remote.runner_info["placement"] == "whole groups"


def test_hierarchy_on_ray_equals_native(cluster):
    rng = np.random.default_rng(3)
    rows = []
    for region, store, n, slope in [("r0", "s0", 200, 1.0), ("r0", "s1", 4, 1.5), ("r1", "s2", 150, -2.0), ("r1", "s3", 90, 0.5)]:
        x = rng.normal(size=n)
        rows += [(region, store, float(v), slope * float(v) + 0.1 * rng.normal()) for v in x]
    t = pa.table({k: [r[i] for r in rows] for i, k in enumerate(["region", "store", "x", "y"])})
    kw = dict(by=["region", "store"], target="y", valid=0.2, min_rows=10, hierarchy=True, params={"C": [0.1, 1]})
    native = gf.fit(t, **kw)
    remote = gf.fit(t, runner=gf.RayRunner(workers=3), **kw)
    probe = pa.table({"region": ["r0", "r0", "r1", "r9"], "store": ["s0", "s1", "new", "x"], "x": [0.5] * 4})
    a, b = native.predict_table(probe), remote.predict_table(probe)
    assert a.column("route").to_pylist() == ["own", "level:region", "level:region", "unseen"]
    assert b.column("route").to_pylist() == a.column("route").to_pylist()
    np.testing.assert_allclose(b.column("prediction").to_numpy(), a.column("prediction").to_numpy(), rtol=1e-7)
