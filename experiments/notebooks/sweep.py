# %% [markdown]
# # Schedules × microbatches × layouts: GPT-3 13B on 64 simulated A100s
#
# Runs as a script (`python3 experiments/notebooks/sweep.py [--short] [--out DIR]`) or cell
# by cell in Jupyter / VS Code (the `# %%` markers).  Every point is one SimGrid simulation
# of the plan through the `quintnet` Python module (each in a child process, so one Python
# process simulates them all).  Writes two PNGs (docs/images/sweep_gpt3_13b_*.png) and
# prints the table; docs/PYTHON.md shows them.
#
# Needs the module on the path: PYTHONPATH=build/python (an installed QuintNet puts it in
# dist-packages) and Debian's python3-matplotlib.

# %%
import argparse
import os
import sys
import time

import quintnet

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
parser = argparse.ArgumentParser(description=__doc__)
parser.add_argument("--short", action="store_true", help="a few points only (CI)")
parser.add_argument("--out", default=os.path.join(ROOT, "docs", "images"), help="where the PNGs go")
args, _ = parser.parse_known_args()  # a notebook kernel passes its own arguments

# GPT-3 13B (Brown et al. 2020, table 2.1): 40 layers, d_model 5120, 40 heads, sequence 2048.
GPT3_13B = {"n_layer": 40, "n_embd": 5120, "n_head": 40, "n_inner": 20480, "n_positions": 2048, "vocab_size": 50257}
GPUS, NODES, MICRO_BATCH = 64, 8, 1
SCHEDULES = ["afab", "1f1b", "interleaved", "zb-h1"]
MICROBATCHES = [4, 8, 16, 32]
LAYOUTS = [(8, 2), (8, 4), (4, 4), (8, 8)]  # (tp, pp); dp = 64 / (tp pp)
if args.short:
    SCHEDULES, MICROBATCHES, LAYOUTS = ["1f1b", "interleaved"], [4, 16], [(8, 4)]


def plan_for(schedule, microbatches, tp, pp):
    dp = GPUS // (tp * pp)
    plan = {
        "model_config": GPT3_13B,
        "max_seq_length": 2048,
        "mesh_dim": [dp, tp, pp],
        "mesh_name": ["dp", "tp", "pp"],
        "schedule": schedule,
        "grad_acc_steps": microbatches,
        "batch_size": MICRO_BATCH * microbatches * dp,
    }
    if schedule == "interleaved":
        plan["virtual_stages"] = 2
    return plan


# %% One simulation per point; a plan that does not fit in 80 GB, or that validation
# refuses, is recorded with the reason.
rows = []
started = time.time()
points = [(s, m, tp, pp) for tp, pp in LAYOUTS for s in SCHEDULES for m in MICROBATCHES]
for i, (schedule, m, tp, pp) in enumerate(points, 1):
    try:
        r = quintnet.simulate(plan_for(schedule, m, tp, pp), platform="dgx-a100", nodes=NODES)
        rows.append(dict(schedule=schedule, microbatches=m, tp=tp, pp=pp, fits=True, **r))
    except quintnet.Error as e:
        rows.append(dict(schedule=schedule, microbatches=m, tp=tp, pp=pp, fits=False, why=str(e)))
    print(f"\r{i}/{len(points)} simulated", end="", file=sys.stderr, flush=True)
print(f"\n{len(points)} simulations in {time.time() - started:.1f} s", file=sys.stderr)

# %% The table
print("| tp × pp (dp) | schedule | m | step (s) | bubble | tokens/s | memory/GPU |")
print("|---|---|---|---|---|---|---|")
for r in rows:
    layout = f"{r['tp']} × {r['pp']} ({GPUS // (r['tp'] * r['pp'])})"
    if r["fits"]:
        print(f"| {layout} | {r['schedule']} | {r['microbatches']} | {r['step_time_s']:.3f} | "
              f"{r['bubble_fraction']:.3f} | {r['tokens_per_s']:,.0f} | {r['peak_memory_bytes'] / 2**30:.1f} GiB |")
    elif "does not fit" in r["why"]:
        print(f"| {layout} | {r['schedule']} | {r['microbatches']} | does not fit in 80 GB | | | |")
    else:  # the plan itself is refused (e.g. interleaved with fewer microbatches than stages)
        print(f"| {layout} | {r['schedule']} | {r['microbatches']} | refused: {r['why'].split(': ', 1)[-1]} | | | |")

# %% The pictures
import matplotlib  # noqa: E402

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

os.makedirs(args.out, exist_ok=True)


def series(schedule, tp, pp, key):
    pts = [(r["microbatches"], r[key]) for r in rows
           if r["fits"] and r["schedule"] == schedule and (r["tp"], r["pp"]) == (tp, pp)]
    return [p[0] for p in pts], [p[1] for p in pts]


def plot(key, ylabel, title, name, scale=1.0):
    """One panel per layout, one line per schedule: `key` against microbatches."""
    fig, axes = plt.subplots(1, len(LAYOUTS), figsize=(4.2 * len(LAYOUTS), 3.6), sharey=True, squeeze=False)
    for ax, (tp, pp) in zip(axes[0], LAYOUTS):
        for schedule in SCHEDULES:
            x, y = series(schedule, tp, pp, key)
            ax.plot(x, [v * scale for v in y], marker="o", label=schedule)
        ax.set_title(f"tp {tp} × pp {pp} × dp {GPUS // (tp * pp)}")
        ax.set_xscale("log", base=2)
        ax.set_xticks(MICROBATCHES, [str(m) for m in MICROBATCHES])
        ax.set_xlabel("microbatches per step")
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel(ylabel)
    axes[0][0].legend()
    fig.suptitle(f"GPT-3 13B on 64 A100s (SimGrid): {title}")
    fig.tight_layout()
    path = os.path.join(args.out, name)
    fig.savefig(path, dpi=110)
    return path


bubble_png = plot("bubble_fraction", "bubble fraction (simulated)", "idle share of the compute lanes",
                  "sweep_gpt3_13b_bubble.png")
throughput_png = plot("tokens_per_s", "predicted thousand tokens/s",
                      "predicted throughput (missing points: do not fit or refused)", "sweep_gpt3_13b_throughput.png",
                      scale=1e-3)
print(f"wrote {bubble_png} and {throughput_png}", file=sys.stderr)
