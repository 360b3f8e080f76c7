"""Small real shard sets for the pretraining tests, written in the `corpus.shards.format` layout.

Real sample text tokenized with the shipped GPT-2 tokenizer (`pretrain.train.sample_shards`), and synthetic
token streams for the mechanics tests.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import torch

from corpus.shards.format import Manifest, ShardInfo, TokenizerInfo, write_shard
from pretrain.train.sample_shards import write_shard_set

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def shards(tmp_path_factory, sample_dir) -> Path:
    """~40k train tokens of Bangla and English sample text (GPT-2 ids) and a val shard per language."""
    return write_shard_set(tmp_path_factory.mktemp("shards"), {
        "bn": [sample_dir / "bn" / "literature-bnarchive.txt.gz"],
        "en": [sample_dir / "en" / "wiki-en-chinapedia.txt.gz"],
    }, train_chars=24000, val_chars=6000)


SYNTHETIC_VOCAB = 512
SYNTHETIC_SHA = "5" * 64  # stands for "a tokenizer"; the mechanics tests never decode


def write_synthetic_shards(out: Path, *, train_tokens: int = 40000, val_tokens: int = 3000, seed: int = 0,
                           sha256: str = SYNTHETIC_SHA) -> Path:
    """A learnable token stream (each id mostly follows from the previous one) in the real shard layout."""
    rng = np.random.default_rng(seed)

    def stream(n: int, shift: int) -> np.ndarray:
        ids = np.empty(n, dtype=np.int64)
        ids[0] = 0
        for i in range(1, n):
            ids[i] = 0 if i % 200 == 0 else ((ids[i - 1] * 7 + shift) % (SYNTHETIC_VOCAB - 1) + 1
                                            if rng.random() > 0.1 else rng.integers(1, SYNTHETIC_VOCAB))
        return ids

    out.mkdir(parents=True, exist_ok=True)
    shards = []
    train = stream(train_tokens, 3)
    write_shard(out / "train_000.bin", train[: train_tokens // 2], "uint16")
    write_shard(out / "train_001.bin", train[train_tokens // 2:], "uint16")
    for i, part in enumerate((train[: train_tokens // 2], train[train_tokens // 2:])):
        shards.append(ShardInfo(file=f"train_00{i}.bin", split="train", tokens=len(part), documents=len(part) // 200,
                                tokens_by_language={"bn": len(part)}))
    for lang, shift in (("bn", 3), ("en", 5)):
        ids = stream(val_tokens, shift)
        write_shard(out / f"val_{lang}.bin", ids, "uint16")
        shards.append(ShardInfo(file=f"val_{lang}.bin", split="val", tokens=len(ids), documents=-(-len(ids) // 200),
                                tokens_by_language={lang: len(ids)}, language=lang, chars=2 * len(ids),
                                bytes=4 * len(ids)))
    Manifest(tokenizer=TokenizerInfo(spec="synthetic", sha256=sha256, vocab_size=SYNTHETIC_VOCAB, bos_id=0),
             dtype="uint16", shards=shards).save(out)
    return out


@pytest.fixture(scope="session")
def synthetic_shards(tmp_path_factory) -> Path:
    return write_synthetic_shards(tmp_path_factory.mktemp("synthetic"))


# Small enough that a step takes milliseconds on one CPU thread.
MICRO_OVERRIDES = ["model.n_layer=2", "model.n_embd=32", "model.n_head=2", "model.block_size=32",
                   "train.global_batch_tokens=256", "data.micro_batch=4", "data.eval_tokens=256",
                   "train.tensorboard=no", "train.threads=1", "optim.warmup_steps=3", "optim.lr=3e-3",
                   "train.preflight_steps=1"]


def micro_args(data: Path, out: Path, steps: int, *extra: str) -> list[str]:
    """`pretrain launch` arguments for a micro run."""
    args = ["launch", "--config", "tiny", "--data", str(data), "--out", str(out), "--max-steps", str(steps),
            "--no-supervisor", "--no-eval"]
    for o in MICRO_OVERRIDES:
        args += ["--set", o]
    return args + list(extra)


def micro_config(data: Path, out: Path, *overrides: str):
    from pretrain.config import apply_overrides, preset

    cfg = preset("tiny", Manifest.load(data).tokenizer.vocab_size)
    return apply_overrides(cfg, [*MICRO_OVERRIDES, f"data.path={data}", f"train.out={out}", "train.supervisor=no",
                                 *overrides])


def micro_runs(data: Path, root: Path, steps: int, *extra: str) -> Callable[[str], Path]:
    """optimizer -> the folder of an uninterrupted micro run with it under ``root``, each made when first asked
    (the reference that interrupted or distributed runs of a test module are compared with)."""
    from pretrain.cli import main

    made: dict[str, Path] = {}

    def run(optimizer: str) -> Path:
        if optimizer not in made:
            made[optimizer] = root / f"reference-{optimizer}" / "run"
            assert main(micro_args(data, made[optimizer], steps, *extra, "--optimizer", optimizer)) == 0
        return made[optimizer]
    return run


# The 1-process reference of the runs on several hosts or Slurm nodes: 8 steps, checkpoints at steps 4 and 8.
REFERENCE_STEPS, REFERENCE_ARGS = 8, ("--set", "train.checkpoint_interval=4", "--optimizer", "adamw")


def assert_same_run(run: Path, reference: Path, steps: int) -> None:
    """``run`` trained ``steps`` steps with the same loss, gradient norm and learning rate at every step as
    ``reference``, bit for bit, and ends with the same weights (runs of 2 DDP processes at the reference's
    global batch: the tests of several hosts say why that is exact)."""
    from pretrain.eval.plots import trajectory
    from pretrain.train.checkpoint import latest_checkpoint, load_checkpoint

    a, b = trajectory(reference), trajectory(run)
    assert [r["step"] for r in b] == list(range(1, steps + 1))
    for key in ("loss", "grad_norm", "lr"):
        assert [r[key] for r in b] == [r[key] for r in a], key
    mine, theirs = load_checkpoint(latest_checkpoint(run)), load_checkpoint(latest_checkpoint(reference))
    assert mine["model"].keys() == theirs["model"].keys()
    for name, tensor in theirs["model"].items():
        assert mine["model"][name].equal(tensor), name


class Micro:
    """Helpers handed to tests (with --import-mode=importlib a test module cannot import conftest)."""

    root = ROOT
    vocab = SYNTHETIC_VOCAB
    sha256 = SYNTHETIC_SHA
    overrides = MICRO_OVERRIDES
    args = staticmethod(micro_args)
    runs = staticmethod(micro_runs)
    config = staticmethod(micro_config)
    write_synthetic = staticmethod(write_synthetic_shards)
    write_real = staticmethod(write_shard_set)
    assert_same_run = staticmethod(assert_same_run)
    reference_steps, reference_args = REFERENCE_STEPS, REFERENCE_ARGS


@pytest.fixture(scope="session")
def micro() -> type[Micro]:
    return Micro


@pytest.fixture(scope="session")
def one_process_reference(micro, synthetic_shards, tmp_path_factory) -> Path:
    """The micro run of ``Micro.reference_steps`` steps in one process with ``Micro.reference_args``: what runs of
    several hosts or Slurm nodes at the same global batch are compared with (tests that write into it copy it
    first)."""
    return micro.runs(synthetic_shards, tmp_path_factory.mktemp("one"), REFERENCE_STEPS, *REFERENCE_ARGS[:2])("adamw")


@pytest.fixture(scope="module")
def one_torch_thread():
    """One torch thread for a module: on a shared 2-core machine two threads contend and run many times slower."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="session")
def tiny_run(tmp_path_factory, shards) -> Path:
    """A 3-step `tiny` run (2 layers, d=64, context 128) on the gpt2-tokenized sample shards, for the
    evaluation, harness and model-card tests; tests that write into a run copy it first."""
    from pretrain.cli import main

    run = tmp_path_factory.mktemp("tiny_run") / "run"
    code = main(["launch", "--config", "tiny", "--data", str(shards), "--out", str(run), "--max-steps", "3",
                 "--set", "model.n_layer=2", "--set", "model.n_embd=64", "--global-batch-tokens", "512",
                 "--micro-batch", "4", "--set", "data.eval_tokens=256", "--set", "train.preflight_steps=0",
                 "--set", "train.tensorboard=false", "--set", "train.threads=1", "--no-supervisor", "--no-eval"])
    assert code == 0
    return run


@pytest.fixture(scope="session")
def tiny_export(tmp_path_factory, tiny_run) -> Path:
    """`pretrain export` of the tiny run's checkpoint (an HF folder)."""
    from pretrain.release.export import export_checkpoint
    from pretrain.train.checkpoint import latest_checkpoint

    return export_checkpoint(latest_checkpoint(tiny_run), tmp_path_factory.mktemp("tiny_export") / "hf")
