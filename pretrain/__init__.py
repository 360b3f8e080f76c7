"""Pretraining a Bangla-first GPT on corpus shards, one sub-package per concern: ``model`` (the GPT and its
Llama conversion), ``train`` (the loop and what it needs), ``guard`` (launch, preflight, plan, gradient flow,
supervisor), ``perf`` (speed), ``release`` (export, model card), ``eval`` (evaluation); ``config`` is the run
config and ``cli`` the ``pretrain`` command. The layering is docs/pretrain.md's "Modules"."""
