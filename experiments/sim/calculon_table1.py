"""Calculon (calculon-ai/calculon, Apache-2.0) on the rows of Narayanan et al. 2021, Table 1,
as a peer for experiments/sim/megatron_table1.sh: the same rows, run the way NVIDIA's own
scripts ran them, each through Calculon's LLM model with its own A100 system file.

    python3 calculon_table1.py CALCULON_DIR < rows

Reads the rows megatron_table1.sh passes (one per line: billions heads hidden layers tp pp
gpus batch micro_batch chunks dp_overlap published), prints one JSON object per row:
{"billions": ..., "step_s": ..., "system": ...}.  Needs Calculon's Python dependencies
(numpy, pandas, psutil); megatron_table1.sh makes a virtual environment with them.

Mapping to Calculon's execution fields: float16; fused activation (Megatron's bias-GeLU);
multi-head attention; full recomputation; tensor-parallel all-reduces ("ar") not
overlapped; the data-parallel all-reduce overlapped where Megatron's torch DDP ran
(dp_overlap 1); no optimizer sharding or offload; tensor parallelism on Calculon's first
network (NVLink, 8 GPUs), pipeline and data parallelism on its second (InfiniBand).
"""
import json
import logging
import os
import sys

SYSTEM = "systems/a100_80g.json"  # the file Calculon's own time validation uses


def main():
    calculon_dir = sys.argv[1]
    sys.path.insert(0, calculon_dir)
    import calculon  # noqa: E402  (from the checkout named on the command line)
    from calculon.llm import Llm

    system = calculon.System(calculon.io.read_json_file(os.path.join(calculon_dir, SYSTEM)))
    log = logging.getLogger("calculon")
    for line in sys.stdin:
        if not line.strip():
            continue
        billions, heads, hidden, layers, tp, pp, gpus, batch, mbs, chunks, overlap, _ = line.split()
        heads, hidden, layers, tp, pp, gpus, batch, mbs, chunks = map(
            int, (heads, hidden, layers, tp, pp, gpus, batch, mbs, chunks))
        dp = gpus // (tp * pp)
        app = Llm.Application({"hidden": hidden, "feedforward": 4 * hidden, "seq_size": 2048,
                               "attn_heads": heads, "attn_size": hidden // heads, "num_blocks": layers})
        exe = Llm.Execution.from_json({
            "num_procs": gpus, "tensor_par": tp, "pipeline_par": pp, "data_par": dp,
            "tensor_par_net": 0, "pipeline_par_net": 1 if pp > 1 else 0, "data_par_net": 1,
            "batch_size": batch, "microbatch_size": mbs, "datatype": "float16",
            "fused_activation": True, "attention_type": "multihead", "activation_recompute": "full",
            "pipeline_interleaving": chunks, "optimizer_sharding": False, "tensor_par_comm_type": "ar",
            "tensor_par_overlap": "none", "seq_par_ag_redo": False,
            "data_par_overlap": overlap == "1" and dp > 1, "weight_offload": False,
            "activations_offload": False, "optimizer_offload": False, "training": True})
        model = Llm(app, log)
        model.compile(system, exe)
        model.run(system)
        print(json.dumps({"billions": billions, "step_s": model.get_stats_json(False)["total_time"],
                          "system": SYSTEM}), flush=True)


if __name__ == "__main__":
    main()
