"""How closely our GPT matches ``transformers`` Llama holding the same weights, on real tokens: loss, logits and
gradients of one batch, and the loss trajectories of a few training steps (the figures in benchmarks/results/2026-12-01-hf-reference).

    python benchmarks/hf_reference.py --data SHARDS [--config tiny] [--batch 4] [--seq-len 128] [--steps 10]

The conversion and the comparisons are `pretrain.model.hf_llama`'s (which the tests hold to their tolerances);
this prints them as JSON for a preset's shape and a shard folder's first train tokens.
"""

from __future__ import annotations

import argparse
import copy
import json
from pathlib import Path

import torch

from corpus.shards.format import Manifest, read_shard
from pretrain.config import model_config
from pretrain.model.gpt import GPT
from pretrain.model.hf_llama import compare, to_hf, train_trajectories


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python benchmarks/hf_reference.py", description=__doc__.split("\n\n")[0])
    p.add_argument("--data", required=True, help="shard directory (manifest.json + train shards)")
    p.add_argument("--config", default="tiny", help="model preset")
    p.add_argument("--batch", type=int, default=4)
    p.add_argument("--seq-len", type=int, default=128)
    p.add_argument("--steps", type=int, default=10, help="training steps of the trajectory comparison")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    manifest = Manifest.load(args.data)
    need = args.steps * args.batch * args.seq_len + 1
    ids = read_shard(Path(args.data) / manifest.split("train")[0].file)[:need].astype("int64")
    if len(ids) < need:
        p.error(f"--data {args.data}: the first train shard has {len(ids)} tokens, {need} needed")
    tokens = torch.from_numpy(ids)
    batches = [(tokens[i * args.batch * args.seq_len:(i + 1) * args.batch * args.seq_len].view(args.batch, -1),
                tokens[i * args.batch * args.seq_len + 1:(i + 1) * args.batch * args.seq_len + 1].view(args.batch, -1))
               for i in range(args.steps)]
    torch.manual_seed(args.seed)
    model = GPT(model_config(args.config, manifest.tokenizer.vocab_size, block_size=args.seq_len))
    start = copy.deepcopy(model.state_dict())
    c = compare(model, to_hf(model), *batches[0])
    model.load_state_dict(start)
    ours, theirs = train_trajectories(model, to_hf(model), batches)
    result = {"config": args.config, "vocab_size": model.cfg.vocab_size, "batch": [args.batch, args.seq_len],
              "loss_ours": c.loss_ours, "loss_hf": c.loss_hf, "logits_max_abs": c.logits_max_abs,
              "logits_max_rel": c.logits_max_rel, "grad_max_rel": c.grad_max_rel, "grad_worst": c.grad_worst,
              "trajectory_ours": ours, "trajectory_hf": theirs,
              "trajectory_max_rel": max(abs(a - b) / abs(b) for a, b in zip(ours, theirs, strict=True))}
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
