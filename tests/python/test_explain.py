"""`groupfit explain`: the planner's estimates, without training."""
import json
import os

import pytest

from conftest import assert_cli_error, make_grouped, run

STRATEGIES = ["tp", "dp", "fused", "hybrid"]


def explain_json(gf, data, *extra, env=None):
    args = ["explain", "--data", data, "--by", "g", "--target", "y", "--json", *extra]
    out = gf.ok(*args)
    lines = [ln for ln in out.splitlines() if ln.strip()]
    assert len(lines) == 1
    return json.loads(lines[0])


def auto_rule(e):
    """What auto picks: the cheapest estimate, or among those within 0.5% of
    it the one with the fewest jumps (then the cheapest, then the first listed)."""
    best = min(s["pass_s"] for s in e["strategies"])
    ties = [s for s in e["strategies"] if s["pass_s"] <= best * 1.005]
    return min(ties, key=lambda s: (s["jumps"], s["pass_s"]))["strategy"]


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    d = tmp_path / "cache"
    monkeypatch.setenv("GROUPFIT_CACHE_DIR", str(d))
    return d


def test_explain_prices_every_strategy_and_trains_nothing(gf, tmp_path, cache_dir):
    sizes = {"big": 9000, **{f"s{i}": 60 + 13 * i for i in range(30)}}
    cols, _ = make_grouped(seed=3, sizes=sizes, d=4)
    data = gf.write_parquet(tmp_path / "t.parquet", cols)
    out = tmp_path / "m.gfm"
    e = explain_json(gf, data, "--param", "C=0.1,1", "--threads", "2", "--out", out)
    assert not out.exists(), "explain must not write a model"
    assert e["groups"] == 31 and e["groups_own"] == 31
    assert e["units"] == (31 + 1) * 2
    assert e["workers"] == 2 and e["features"] == 4
    names = [s["strategy"] for s in e["strategies"]]
    assert names == STRATEGIES
    for s in e["strategies"]:
        assert s["pass_s"] == pytest.approx(s["compute_s"] + s["sync_s"] + s["idle_s"])
        assert min(s["compute_s"], s["sync_s"], s["idle_s"]) >= 0
        assert s["groups_whole"] + s["groups_cut"] == 32  # the global model's rows count as a group
        assert s["state_bytes"] > 0
    by = {s["strategy"]: s for s in e["strategies"]}
    assert e["auto"] == auto_rule(e)
    # fused scans each worker's range in order; tp deals the groups out.
    assert by["fused"]["jumps"] == 0 and by["tp"]["jumps"] > 0
    # tp never cuts, dp cuts every group with more than one block and has a stage per group.
    assert by["tp"]["groups_cut"] == 0 and by["tp"]["stages"] == 1
    assert by["dp"]["stages"] == 32
    assert {g["key"] for g in by["dp"]["cut"]} >= {"(global)", "big"}
    # dp reduces every group every pass: more synchronisation than tp.
    assert by["dp"]["sync_s"] > by["tp"]["sync_s"]
    c = e["calibration"]
    assert c["row_unit_ns"] > 0 and c["stage_us"] > 0 and c["combine_ns"] > 0
    # Every group here is small enough for an exact Hessian on every row, so
    # no row costs more than another.
    assert c["heavy_unit_ns"] == 0
    assert c["cache_file"] == str(cache_dir / "calibration.json")


def test_calibration_is_cached_with_its_date(gf, tmp_path, cache_dir):
    cols, _ = make_grouped(seed=4, sizes={"a": 500, "b": 300}, d=3)
    data = gf.write_parquet(tmp_path / "t.parquet", cols)
    first = explain_json(gf, data)["calibration"]
    assert first["cached"] is False
    cached = json.loads((cache_dir / "calibration.json").read_text())
    assert len(cached) == 1 and cached[0]["date"] == first["date"]
    assert cached[0]["stage_us"] == first["stage_us"]
    second = explain_json(gf, data)["calibration"]
    assert second["cached"] is True and second["stage_us"] == first["stage_us"]
    # Another worker count is measured (and cached) separately.
    third = explain_json(gf, data, "--threads", "3")["calibration"]
    assert third["cached"] is False
    assert len(json.loads((cache_dir / "calibration.json").read_text())) == 2


def test_explain_human_output_names_the_auto_choice(gf, tmp_path, cache_dir):
    cols, _ = make_grouped(seed=5, sizes={"a": 3000, "b": 200, "c": 100}, d=3)
    data = gf.write_parquet(tmp_path / "t.parquet", cols)
    out = gf.ok("explain", "--data", data, "--by", "g", "--target", "y", "--threads", "2")
    e = explain_json(gf, data, "--threads", "2")
    lines = out.splitlines()
    assert lines[0].startswith("plan for linear binary models: 3 groups")
    auto_lines = [ln for ln in lines if ln.endswith("<- auto")]
    assert len(auto_lines) == 1 and auto_lines[0].split()[0] in STRATEGIES
    for s in STRATEGIES:
        assert any(ln.split() and ln.split()[0] == s for ln in lines), s


def test_explain_reports_bad_input_like_train(gf, tmp_path, cache_dir):
    cols, _ = make_grouped(seed=6, sizes={"a": 50}, d=2)
    data = gf.write_parquet(tmp_path / "t.parquet", cols)
    rc, _, err = run("explain", "--data", data, "--by", "g", "--target", "nope")
    assert_cli_error(rc, err, "nope", "t.parquet")
    rc, _, err = run("explain", "--data", data, "--by", "g", "--target", "y", "--strategy", "zigzag")
    assert_cli_error(rc, err, "zigzag", "hybrid")


@pytest.mark.parametrize("model,params", [("gbdt", ["--param", "rounds=5", "--param", "num_leaves=4,8"]),
                                          ("mlp", ["--param", "hidden=8", "--param", "lr=0.01,0.1"])])
def test_every_family_explains(gf, tmp_path, cache_dir, model, params):
    sizes = {"big": 3000, **{f"s{i}": 80 + 7 * i for i in range(10)}}
    cols, _ = make_grouped(seed=8, sizes=sizes, d=3)
    data = gf.write_parquet(tmp_path / "t.parquet", cols)
    e = explain_json(gf, data, "--model", model, "--threads", "2", *params)
    assert e["model"] == model and e["groups"] == 11
    assert [s["strategy"] for s in e["strategies"]] == STRATEGIES
    assert e["auto"] == auto_rule(e)
    for s in e["strategies"]:
        assert s["pass_s"] > 0 and s["state_bytes"] > 0


def test_gbdt_prices_a_booster_round_by_group_size(gf, tmp_path, cache_dir):
    # Small groups in the largest one's histogram class, with at most 1/64
    # of its rows: the pilot times one round each of the median group, the
    # largest small one and the largest (the global model), and explain
    # shows the curve, in JSON and in text. The linear family has none.
    sizes = {"big": 60000, "s0": 900, "s1": 850, "s2": 800}
    cols, _ = make_grouped(seed=9, sizes=sizes, d=3)
    data = gf.write_parquet(tmp_path / "t.parquet", cols)
    args = ["--model", "gbdt", "--threads", "2", "--param", "rounds=3"]
    e = explain_json(gf, data, *args)
    points = e["calibration"]["by_size"]["points"]
    rows = [r for r, _ in points]
    assert len(points) == 3 and rows == sorted(rows)
    assert rows[1] * 64 <= rows[2] == e["rows_train"]  # the global model: every training row
    assert all(ns > 0 for _, ns in points)
    text = gf.ok("explain", "--data", data, "--by", "g", "--target", "y", *args)
    assert "whole passes by group size" in text
    lin = explain_json(gf, data, "--threads", "2")
    assert lin["calibration"]["by_size"] is None


def test_explain_prices_the_ray_runners_plans_with_the_network(gf, tmp_path, cache_dir):
    # One group of 40,000 rows and small ones, 2 Ray workers. The plans of
    # one stage a pass (no dp), their sync priced with two round trips a
    # stage: with 10 ms round trips cutting costs more than it saves, with
    # 10 us it is worth it. The network comes from --network or the last
    # Ray run (network.json), else one clear line.
    sizes = {"big": 40000, **{f"s{i}": 300 + 11 * i for i in range(20)}}
    cols, _ = make_grouped(seed=12, sizes=sizes, d=4)
    data = gf.write_parquet(tmp_path / "t.parquet", cols)
    ray = ["--runner", "ray", "--workers", "2", "--param", "C=0.1,1"]
    slow = explain_json(gf, data, *ray, "--network", "10000,100")
    assert slow["runner"] == "ray" and slow["workers"] == 2
    assert slow["network"] == {"rtt_us": 10000.0, "bytes_per_s": 1e8, "source": "given"}
    assert [s["strategy"] for s in slow["strategies"]] == ["tp", "fused", "hybrid"]
    # two round trips, plus a snapshot of a worker's share of the units
    assert slow["calibration"]["stage_us"] > 20000.0
    assert slow["auto"] == auto_rule(slow)
    by = {s["strategy"]: s for s in slow["strategies"]}
    for s in ("fused", "hybrid"):
        if by[s]["groups_cut"]:
            assert by[s]["sync_s"] > by["tp"]["sync_s"]
    fast = explain_json(gf, data, *ray, "--network", "10,10000")
    assert 20.0 < fast["calibration"]["stage_us"] < slow["calibration"]["stage_us"]
    assert min(s["sync_s"] for s in fast["strategies"]) < min(s["sync_s"] for s in slow["strategies"])
    native = explain_json(gf, data, "--param", "C=0.1,1")
    assert native["runner"] == "native" and native["network"] is None
    rc, _, err = run("explain", "--data", data, "--by", "g", "--target", "y", "--runner", "ray")
    assert_cli_error(rc, err, "no measured network", str(cache_dir / "network.json"), "--network")
    rc, _, err = run("explain", "--data", data, "--by", "g", "--target", "y", "--runner", "ray", "--network", "5")
    assert_cli_error(rc, err, "--network '5'", "ROUND_TRIP_US,MB_PER_S")
    # a Ray run's measurement is what the CLI prices with next
    (cache_dir / "network.json").write_text(
        json.dumps({"network": {"rtt_us": 700.0, "bytes_per_s": 5e8}, "day": 20000})
    )
    cached = explain_json(gf, data, *ray)
    assert cached["network"]["rtt_us"] == 700.0
    assert cached["network"]["source"].startswith("measured 2024-10-04")
    text = gf.ok("explain", "--data", data, "--by", "g", "--target", "y", *ray)
    assert "2 Ray workers" in text and "network: 700 us round trip" in text
