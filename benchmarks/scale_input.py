"""Writes a large prediction input by repeating a Parquet file's batches.

  python benchmarks/scale_input.py SRC OUT ROWS

OUT gets the first ROWS rows of SRC repeated (SRC's schema, row groups of
1M rows). It is written batch by batch, so memory stays small.
"""

import sys

import pyarrow.parquet as pq


def main():
    src, out, rows = sys.argv[1], sys.argv[2], int(sys.argv[3])
    f = pq.ParquetFile(src)
    left = rows
    with pq.ParquetWriter(out, f.schema_arrow) as w:
        while left > 0:
            for batch in f.iter_batches(batch_size=1 << 20):
                if left <= 0:
                    break
                batch = batch.slice(0, min(left, batch.num_rows))
                w.write_batch(batch, row_group_size=1 << 20)
                left -= batch.num_rows


if __name__ == "__main__":
    main()
