"""Prints the MLP benchmark table from a JSON-lines file of one benchmarks/mlp.sh run.

groupfit's row is the run with the median wall time of its repeats; every
ratio is baseline wall time / groupfit wall time, from the same file. Also
checks the issue's targets (>= 8x faster than the fastest baseline;
valid_logloss <= torch-loop's + 0.01) and reports the training loop's GFLOP/s
(floating-point operations of the training steps, counted per row from the
layer shapes: forward, weight gradients, input gradients of every layer but
the first; over the time spent in the passes) against the measured peak.
"""
import json
import sys


def main(path):
    runs = [json.loads(line) for line in open(path) if line.strip()]
    peak = next((r for r in runs if r["system"] == "peak"), None)
    ours = sorted((r for r in runs if r["system"] == "groupfit"), key=lambda r: r["wall_s"])
    if not ours:
        sys.exit("no groupfit run in " + path)
    gf = ours[len(ours) // 2]
    base = [r for r in runs if r["system"] not in ("groupfit", "peak")]
    key = "valid_logloss" if "valid_logloss" in gf else "valid_rmse"
    ref = next((r for r in base if r["system"] == "torch-loop"), None)
    print(f"data: {path}")
    print(f"groupfit: {len(ours)} runs, wall {', '.join('%.3f' % r['wall_s'] for r in ours)} s; "
          f"strategy {gf['strategy']}, {gf['passes']} passes (mini-batch steps), "
          f"load {gf['load_s']:.3f} s, passes {gf['passes_s']:.3f} s")
    hdr = (f"{'system':<16}{'models':>8}{'wall_s':>9}{'load_s':>8}{'train_s':>9}{'x groupfit':>11}"
           f"{key:>15}{'valid_auc':>11}")
    if ref:
        hdr += f"{'d ' + key[6:] + ' vs torch-loop':>25}"
    print(hdr)
    for r in [gf] + base:
        ratio = r["wall_s"] / gf["wall_s"]
        line = (f"{r['system']:<16}{r['models']:>8}{r['wall_s']:>9.3f}{r['load_s']:>8.3f}{r['train_s']:>9.3f}"
                f"{ratio:>10.1f}x{r.get(key, float('nan')):>15.5f}{r.get('valid_auc', float('nan')):>11.5f}")
        if ref:
            line += f"{r.get(key, float('nan')) - ref[key]:>+25.5f}"
        print(line)
    print("x groupfit = that system's wall time / groupfit's (higher: groupfit faster); "
          "groupfit's models include the global fallback model (2 more, trained on all rows)")
    if base:
        fastest = min(base, key=lambda r: r["wall_s"])
        ratio = fastest["wall_s"] / gf["wall_s"]
        print(f"target >= 8x the fastest baseline ({fastest['system']}): {ratio:.1f}x "
              f"-> {'met' if ratio >= 8 else 'NOT met'}")
    if ref:
        d = gf[key] - ref[key]
        print(f"target {key} <= torch-loop + 0.01: {d:+.5f} -> {'met' if d <= 0.01 else 'NOT met'}")
    if gf.get("train_gflop"):
        rate = gf["train_gflop"] / gf["passes_s"]
        line = f"training loop: {gf['train_gflop']:.1f} GFLOP in {gf['passes_s']:.2f} s = {rate:.1f} GFLOP/s"
        if peak:
            line += (f"; measured f32 peak (PyTorch {3072}^3 matmul, {peak['threads']} threads) "
                     f"{peak['gflops']:.0f} GFLOP/s -> {100 * rate / peak['gflops']:.1f}% of it")
        print(line)


if __name__ == "__main__":
    main(sys.argv[1])
