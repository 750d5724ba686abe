"""Cuts the GBDT benchmark's data by group size, for benchmarks/gbdt.sh's SPLIT_AT step.

Writes DATA/split-N/{large,small}/{train,valid}.parquet: the groups with at
least N training rows, and the others (every row of a group stays with it).
Prints one line per part: groups, training rows.

  gbdt_split.py DATA N
"""
import os
import sys

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq


def main(data, at):
    train = pq.read_table(os.path.join(data, "train.parquet"))
    valid = pq.read_table(os.path.join(data, "valid.parquet"))
    counts = pc.value_counts(train.column("group")).to_pylist()
    large = pa.array([c["values"] for c in counts if c["counts"] >= at])
    out = os.path.join(data, f"split-{at}")
    for part, keep in (("large", True), ("small", False)):
        os.makedirs(os.path.join(out, part), exist_ok=True)
        for name, table in (("train", train), ("valid", valid)):
            mask = pc.is_in(table.column("group"), value_set=large)
            if not keep:
                mask = pc.invert(mask)
            pq.write_table(table.filter(mask), os.path.join(out, part, f"{name}.parquet"))
        rows = pq.read_metadata(os.path.join(out, part, "train.parquet")).num_rows
        n = len(large) if keep else len(counts) - len(large)
        print(f"{part}: {n} groups, {rows} training rows", file=sys.stderr)
    print(out)


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]))
