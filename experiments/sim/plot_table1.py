"""Draws Narayanan et al.'s Table 1 against predictions: the per-GPU TFLOP/s each model got
(published) and what each prediction says, one line per predictor, from the JSON files
megatron_table1.sh writes (QN_TABLE1_JSON=FILE).

    python3 plot_table1.py OUT.png LABEL=FILE [LABEL=FILE ...]

Each FILE's "quintnet" column is drawn under its LABEL; the published figures and
Calculon's (when a file has them) once.  Needs matplotlib (Debian: python3-matplotlib).
"""
import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main():
    if len(sys.argv) < 3 or any("=" not in a for a in sys.argv[2:]):
        sys.exit("usage: plot_table1.py OUT.png LABEL=FILE [LABEL=FILE ...]")
    out = sys.argv[1]
    runs = [(label, json.load(open(path))) for label, path in (a.split("=", 1) for a in sys.argv[2:])]
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(8, 7), sharex=True, gridspec_kw={"height_ratios": [3, 2]})
    first = runs[0][1]
    x = list(range(len(first)))
    names = [f"{r['billions']:g}B" for r in first]
    published = [r["published"] for r in first]
    top.plot(x, published, "ks-", label="published (Narayanan et al. 2021, Table 1)", linewidth=2)
    bottom.axhspan(-10, 10, color="0.9", label="±10%")
    series = [(label, [r["quintnet"] for r in rows]) for label, rows in runs]
    calculon = next(([r["calculon"] for r in rows] for _, rows in runs if all(r["calculon"] for r in rows)), None)
    if calculon:
        series.append(("Calculon (its systems/a100_80g.json)", calculon))
    for label, values in series:
        top.plot(x, values, "o-", label=label)
        bottom.plot(x, [100 * (v - p) / p for v, p in zip(values, published)], "o-", label=label)
    top.set_ylabel("TFLOP/s per A100")
    top.legend(fontsize=8)
    top.grid(alpha=0.3)
    bottom.axhline(0, color="k", linewidth=0.8)
    bottom.set_ylabel("error vs published (%)")
    bottom.set_xticks(x)
    bottom.set_xticklabels(names)
    bottom.set_xlabel("model (32 to 3,072 A100s)")
    bottom.grid(alpha=0.3)
    fig.suptitle("Megatron-LM's published runs against predictions")
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
