"""Every Arrow key type groups rows by value: integers of every width
(int64 and uint64 beyond 2^53 stay distinct), floats with NaN as a key of
its own, booleans, text, dictionaries, dates and binary, each with nulls
as a key of their own. Rows predict with their group's own model, after a
save and load too."""

import numpy as np
import pyarrow as pa
import pytest

import groupfit as gf

N = 600
BIG = 2**53


def groups_of(seed: int = 0):
    rng = np.random.default_rng(seed)
    g = rng.integers(0, 3, N)
    x = rng.standard_normal(N)
    y = (x + 0.5 * g + rng.standard_normal(N) > 0).astype(np.float64)
    return g, x, y


G, X, Y = groups_of()

# name -> (key column, the keys as the scores table shows them, sorted)
KEYS = {
    "int8": (pa.array(G, pa.int8()), ["0", "1", "2"]),
    "int16": (pa.array(G, pa.int16()), ["0", "1", "2"]),
    "int32": (pa.array(G, pa.int32()), ["0", "1", "2"]),
    "int64 beyond 2^53": (pa.array(BIG + G, pa.int64()), [str(BIG), str(BIG + 1), str(BIG + 2)]),
    "uint8": (pa.array(G, pa.uint8()), ["0", "1", "2"]),
    "uint64 beyond 2^63": (
        pa.array(np.uint64(2**63) + G.astype(np.uint64), pa.uint64()),
        [str(2**63), str(2**63 + 1), str(2**63 + 2)],
    ),
    "float32 with NaN": (pa.array(np.where(G == 2, np.nan, G).astype(np.float32)), ["0", "1", "NaN"]),
    "float64 with NaN": (pa.array(np.where(G == 2, np.nan, G)), ["0", "1", "NaN"]),
    "int64 with nulls": (pa.array([None if v == 2 else int(v) for v in G], pa.int64()), ["0", "1", None]),
    "bool with nulls": (pa.array([None if v == 2 else bool(v) for v in G]), ["false", "true", None]),
    "string with nulls": (pa.array([None if v == 2 else f"k{v}" for v in G]), ["k0", "k1", None]),
    "large_string": (pa.array([f"k{v}" for v in G], pa.large_string()), ["k0", "k1", "k2"]),
    "dictionary": (pa.array([f"k{v}" for v in G]).dictionary_encode(), ["k0", "k1", "k2"]),
    "date32": (pa.array(G.astype("datetime64[D]")), ["1970-01-01", "1970-01-02", "1970-01-03"]),
    "binary": (pa.array([bytes([v]) for v in G], pa.binary()), ["\x00", "\x01", "\x02"]),
}


def sort_keys(keys):
    return sorted(keys, key=lambda k: (k is None, k or ""))


@pytest.mark.parametrize("name", list(KEYS))
def test_every_key_type_groups_rows_by_value(name, tmp_path):
    column, shown = KEYS[name]
    table = pa.table({"k": column, "x": X, "y": Y})
    # a validation table of its own: every row trains, so groups compare with groups alone
    model = gf.fit(table, by="k", target="y", min_rows=10, valid=table)
    assert model.summary["groups"] == 3
    scores = model.scores
    keys = scores.column(0).to_pylist()
    assert sort_keys(keys) == sort_keys(shown)
    # `shown[v]` is group v's key: its training rows are its rows
    counts = np.bincount(G, minlength=3)
    rows = scores.column("rows").to_pylist()
    for v in range(3):
        assert rows[keys.index(shown[v])] == counts[v]
    predicted = model.predict_table(table)
    assert set(predicted.column("route").to_pylist()) == {"own"}
    # a group's rows get its own model: the same as the group trained alone
    p = predicted.column("prediction").to_numpy()
    for v in range(3):
        rows = np.flatnonzero(G == v)
        part = table.take(rows)
        alone = gf.fit(part, by="k", target="y", min_rows=10, valid=part, global_model=False)
        np.testing.assert_allclose(alone.predict(table.take(rows)), p[rows], rtol=1e-9, atol=1e-12)
    # the model file keeps the key type: a loaded model routes the same
    path = tmp_path / "m.gfm"
    model.save(str(path))
    again = gf.load(str(path)).predict_table(table)
    assert again.column("prediction").equals(predicted.column("prediction"))
