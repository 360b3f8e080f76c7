"""`tiny` training steps at each torch thread count, as tokens/s and the ratio to one thread.

    python benchmarks/bench_threads.py [--vocab-size 8000] [--threads 1,2] [--steps 8] [--rounds 3]

What `pretrain.train.hardware.cpu_threads` (the default of ``train.threads``) is chosen from. The model is `tiny`
for a tokenizer of ``--vocab-size`` ids and the step is the trainer's (`pretrain.train.optim.train_step`: AdamW,
fp32 on CPU) on one global batch of the preset's size with random ids (the cost of a step does not depend on
the ids). The thread counts take turns, ``--steps`` steps each per round after one untimed step, for
``--rounds`` rounds, so a change in the machine's load falls on every count alike; each count's figure is
its median step. It also prints the machine's load average before and after: on a machine shared with other
work the figures are that machine's, not the CPU's.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import torch

from pretrain.config import preset
from pretrain.model.gpt import build_model
from pretrain.train.distributed import Runtime
from pretrain.train.hardware import cpu_threads
from pretrain.train.optim import batch_layout, make_optimizer, train_step


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--vocab-size", type=int, default=8000)
    p.add_argument("--threads", default="1,2", help="comma-separated thread counts")
    p.add_argument("--steps", type=int, default=8, help="timed steps per thread count and round")
    p.add_argument("--rounds", type=int, default=3)
    args = p.parse_args()
    counts = [int(t) for t in args.threads.split(",")]

    cfg = preset("tiny", args.vocab_size)
    runtime = Runtime(device=torch.device("cpu"), autocast_dtype=None)
    sequences, accum = batch_layout(cfg, 1)
    gen = torch.Generator().manual_seed(0)
    batch = torch.randint(0, args.vocab_size, (sequences, cfg.seq_len + 1), generator=gen)
    micro = list(batch.split(cfg.data.micro_batch))
    model = build_model(cfg.model, cfg.train.seed)
    optimizer = make_optimizer(model, cfg.optim, runtime.device)

    def step() -> float:
        t0 = time.perf_counter()
        train_step(model, optimizer, micro, runtime, cfg.optim.grad_clip)[0].item()
        return time.perf_counter() - t0

    load = os.getloadavg()
    times: dict[int, list[float]] = {t: [] for t in counts}
    for _ in range(args.rounds):
        for t in counts:
            torch.set_num_threads(t)
            step()  # untimed: the first step at a new thread count starts the thread pool
            times[t] += [step() for _ in range(args.steps)]
    print(f"`tiny`, vocabulary {args.vocab_size:,}, {cfg.train.global_batch_tokens:,} tokens a step "
          f"({sequences} x {cfg.seq_len}, {accum} micro-batch(es)); usable cores {len(os.sched_getaffinity(0))}, "
          f"default threads (cpu_threads) {cpu_threads()}; load average {load[0]:.2f} before, "
          f"{os.getloadavg()[0]:.2f} after")
    base = cfg.train.global_batch_tokens / statistics.median(times[counts[0]])
    for t in counts:
        tps = cfg.train.global_batch_tokens / statistics.median(times[t])
        print(f"  threads {t:>2}: {tps:>8,.0f} tokens/s  ({tps / base:.2f}x of {counts[0]} thread(s))")


if __name__ == "__main__":
    main()
