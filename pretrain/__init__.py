"""Pretraining a Bangla-first GPT on corpus shards: model, data, training loop, checkpoints, evaluation,
preflight, and the checks that make a run trustworthy (arbiter, supervisor, reference, bench)."""
