"""The MLP family against an independent numpy reference implementation.

The engine writes, when GROUPFIT_MLP_DUMP=FILE is set, each fitted group's
training rows (file row indices), the initial parameters of each config and
each epoch's permutation (see `mlp::grouped::dump_schedule`); it does not
change what is trained. This test replays training in float64 numpy from the
same initial weights and batch order -- standardisation by the group's mean
and population standard deviation, ReLU layers, BCE-with-logits or squared
error averaged over the batch, torch.optim.Adam / SGD (weight decay added to
the gradient) -- and checks the per-epoch training loss the model file records
(`epoch_loss`: each epoch's batch losses before their steps, weighted by batch
rows) to 1e-4, and the predictions of `groupfit predict`.
"""

from __future__ import annotations

import json
import os
import subprocess

import numpy as np
import pytest

from conftest import binary_path, read_parquet, write_parquet


def unflatten(flat, widths):
    layers, o = [], 0
    for n_in, n_out in zip(widths[:-1], widths[1:]):
        w = np.asarray(flat[o:o + n_in * n_out], dtype=np.float64).reshape(n_in, n_out)
        o += n_in * n_out
        b = np.asarray(flat[o:o + n_out], dtype=np.float64)
        o += n_out
        layers.append([w, b])
    assert o == len(flat)
    return layers


def forward(layers, x):
    acts = [x]
    for i, (w, b) in enumerate(layers):
        z = acts[-1] @ w + b
        acts.append(np.maximum(z, 0.0) if i < len(layers) - 1 else z)
    return acts


def loss_and_grads(task, layers, x, y):
    acts = forward(layers, x)
    z = acts[-1][:, 0]
    n = len(y)
    if task == "binary":
        loss = np.mean(np.maximum(z, 0) - z * y + np.log1p(np.exp(-np.abs(z))))
        dz = (1.0 / (1.0 + np.exp(-z)) - y) / n
    else:
        loss = np.mean((z - y) ** 2)
        dz = 2.0 * (z - y) / n
    delta = dz[:, None]
    grads = [None] * len(layers)
    for i in range(len(layers) - 1, -1, -1):
        w, _ = layers[i]
        grads[i] = [acts[i].T @ delta, delta.sum(axis=0)]
        if i > 0:
            delta = (delta @ w.T) * (acts[i] > 0)
    return loss, grads


def replay(task, x, y, init, widths, perms, lr, batch, optimizer="adam", weight_decay=0.0):
    """Returns (epoch losses, final layers)."""
    layers = unflatten(init, widths)
    m = [[np.zeros_like(p) for p in layer] for layer in layers]
    v = [[np.zeros_like(p) for p in layer] for layer in layers]
    step, epoch_loss = 0, []
    for perm in perms:
        total, rows = 0.0, 0
        for lo in range(0, len(perm), batch):
            idx = np.asarray(perm[lo:lo + batch])
            loss, grads = loss_and_grads(task, layers, x[idx], y[idx])
            total += loss * len(idx)
            rows += len(idx)
            step += 1
            for li, layer in enumerate(layers):
                for pi in range(2):
                    g = grads[li][pi] + weight_decay * layer[pi]
                    if optimizer == "sgd":
                        layer[pi] = layer[pi] - lr * g
                        continue
                    m[li][pi] = 0.9 * m[li][pi] + 0.1 * g
                    v[li][pi] = 0.999 * v[li][pi] + 0.001 * g * g
                    bc1, bc2 = 1 - 0.9 ** step, 1 - 0.999 ** step
                    denom = np.sqrt(v[li][pi]) / np.sqrt(bc2) + 1e-8
                    layer[pi] = layer[pi] - (lr / bc1) * m[li][pi] / denom
        epoch_loss.append(total / rows)
    return epoch_loss, layers


def make_data(tmp_path, task, n=300, d=3, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, d)) * np.array([1.0, 5.0, 0.2])[:d] + np.array([2.0, -1.0, 10.0])[:d]
    z = np.sin(x[:, 0]) + 0.3 * x[:, 1] - 4.0 * (x[:, 2] - 10.0)
    if task == "binary":
        y = (rng.uniform(size=n) < 1 / (1 + np.exp(-z))).astype(np.float64)
    else:
        y = z + 0.1 * rng.normal(size=n)
    cols = {"g": ["a"] * n, "y": y}
    for j in range(d):
        cols[f"f{j}"] = x[:, j]
    return write_parquet(tmp_path / "t.parquet", cols), x, y


@pytest.mark.parametrize(
    "task,params,optimizer,wd",
    [
        ("binary", ["hidden=8", "lr=0.01", "epochs=4", "batch_size=32"], "adam", 0.0),
        ("regression", ["layers=6x4", "lr=0.003", "epochs=3", "batch_size=50",
                        "weight_decay=0.01"], "adam", 0.01),
        ("regression", ["hidden=5", "lr=0.01", "epochs=3", "batch_size=64",
                        "optimizer=sgd"], "sgd", 0.0),
    ],
)
def test_epoch_losses_match_numpy_reference(tmp_path, task, params, optimizer, wd):
    data, x, y = make_data(tmp_path, task)
    dump = tmp_path / "dump.json"
    model = tmp_path / "m.gfm"
    args = [str(binary_path()), "train", "--data", data, "--valid", data, "--by", "g",
            "--target", "y", "--task", task, "--model", "mlp", "--min-rows", "1",
            "--threads", "2", "--out", model, "--json"]
    for p in params:
        args += ["--param", p]
    env = {**os.environ, "GROUPFIT_MLP_DUMP": str(dump), "GROUPFIT_TRACE": ""}
    proc = subprocess.run([str(a) for a in args], capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    schedule = json.loads(dump.read_text())["groups"]
    assert len(schedule) == 2  # group "a" and the global model
    proc = subprocess.run([str(binary_path()), "inspect", str(model), "--json"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    bundle = json.loads(proc.stdout)
    models = {0: bundle["groups"][0]["model"], 1: bundle["global"]["model"]}
    p = dict(s.split("=") for s in params)
    lr, batch = float(p["lr"]), int(p["batch_size"])
    for which, entry in enumerate(schedule):
        rows = np.asarray(entry["rows"])
        assert sorted(rows.tolist()) == list(range(len(y)))
        xs = x[rows]
        # Independent standardisation: group mean, population std.
        mean, std = xs.mean(axis=0), xs.std(axis=0)
        np.testing.assert_allclose(entry["mean"], mean, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(entry["std"], std, rtol=1e-12)
        xs = (xs - mean) / std
        widths = entry["widths"][0]
        ref_loss, ref_layers = replay(task, xs, y[rows], entry["init"][0], widths,
                                      entry["permutations"], lr, batch, optimizer, wd)
        got = models[which]
        assert got["family"] == "mlp"
        assert len(got["epoch_loss"]) == int(p["epochs"])
        np.testing.assert_allclose(got["epoch_loss"], ref_loss, rtol=0, atol=1e-4)
        # Final weights agree too (float32 engine vs float64 reference).
        for (w, b), layer in zip(ref_layers, got["layers"]):
            np.testing.assert_allclose(np.asarray(layer["w"]).reshape(w.shape), w, atol=1e-3)
            np.testing.assert_allclose(layer["b"], b, atol=1e-3)
    # `predict` applies the group's model: standardise, forward, sigmoid.
    out = tmp_path / "p.parquet"
    proc = subprocess.run([str(binary_path()), "predict", "--model", str(model), "--data", str(data),
                           "--out", str(out)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    pred = read_parquet(out).column("prediction").to_numpy()
    own = models[0]
    layers = [[np.asarray(l["w"], dtype=np.float64).reshape(l["n_in"], l["n_out"]),
               np.asarray(l["b"], dtype=np.float64)] for l in own["layers"]]
    z = forward(layers, (x - np.asarray(own["mean"])) / np.asarray(own["std"]))[-1][:, 0]
    expect = 1 / (1 + np.exp(-z)) if task == "binary" else z
    np.testing.assert_allclose(pred, expect, rtol=1e-9, atol=1e-9)


def test_mlp_params_errors_are_one_line(tmp_path):
    data, _, _ = make_data(tmp_path, "binary", n=50)
    for bad, needle in [("layers=64y32", "invalid parameter 'layers'"),
                        ("optimizer=rmsprop", "invalid parameter 'optimizer'"),
                        ("lr=0", "invalid parameter 'lr'"),
                        ("C=1", "unknown for model mlp")]:
        proc = subprocess.run([str(binary_path()), "train", "--data", str(data), "--by", "g",
                               "--target", "y", "--model", "mlp", "--param", bad,
                               "--out", str(tmp_path / "m.gfm")],
                              capture_output=True, text=True, timeout=60)
        assert proc.returncode != 0
        assert needle in proc.stderr and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
        assert not (tmp_path / "m.gfm").exists()
