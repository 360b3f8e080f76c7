"""Script-aware training time over a raw HF ``BpeTrainer`` on the same text and vocabulary (goal: at most 1.2).

    python benchmarks/bench_train.py [--vocab-size 8000] [--max-chars 500000] [--repeat 2]
    python benchmarks/bench_train.py --data ../shared/data [--langs bn,hi,ta,te,ml,ur,en]   # seven languages

Both sides train on the same text: the character-balanced sample of the shipped data (Bangla and English),
or with ``--data`` of every training source of ``--langs`` there (``benchmarks/bench_multiscript.py``'s
sources: the seven languages of the shared data). The script-aware side
is the package's whole machinery from the gzip files: ``prepare_text`` (streaming read, canonical
normalisation, validation hold-out, per-language files), the balanced sample streamed from those files, and
``backends.train`` (hf-bpe, words only, whole-grapheme merges as the command sets them for this text) with its
vocabulary padding and saving. The peer is a bare
``BpeTrainer`` fed the same sample from memory, with the same split (so the ratio is the machinery's cost).
A second peer uses HF's default ByteLevel (GPT-2 regex) pre-tokenizer, for information only: it trains
faster on Bangla because it cuts Bangla words into one- or two-character pieces, leaving little to merge.
Timed best of ``--repeat``, wall and CPU (the trainers are multi-threaded; CPU time is steadier on a shared
machine). The optional phrase stage (``--phrase-fraction``) is a second training pass by design and is
printed separately.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import bench_multiscript
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

from fertility.text import parse_text_arg
from tokenizers_train import backends, sampling
from tokenizers_train.pretokenize import hf_pre_tokenizer
from tokenizers_train.run import resolve_train

SAMPLE = Path(__file__).resolve().parents[1] / "data" / "sample"
SOURCES = [f"bn={SAMPLE}/bn/literature-bnarchive.txt.gz", f"bn={SAMPLE}/bn/poems-pd-banglakosh.txt.gz",
           f"en={SAMPLE}/en/wiki-en-chinapedia.txt.gz"]


def raw_hf(lines: list[str], vocab_size: int, pre_tokenizer) -> None:
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizer
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=backends.SPECIAL_TOKENS, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(lines, trainer)


def script_aware(sources, vocab_size: int, max_chars: int, phrase_fraction: float,
                 whole_graphemes: bool | None = None) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        prepared = sampling.prepare_text(sources, Path(tmp) / "work", max_chars_per_source=max_chars, progress=False)
        shares = sampling.resolve_shares({k: v.train_chars for k, v in prepared.languages.items()})
        budgets = sampling.sample_budgets(prepared, shares, None)
        config = backends.TrainConfig(vocab_size=vocab_size, phrase_fraction=phrase_fraction, show_progress=False)
        config = resolve_train(config, whole_graphemes, prepared)
        backends.train(config, lambda: sampling.iter_sample(prepared, budgets), Path(tmp) / "tok")


def best_of(repeat: int, fn, *args) -> tuple[float, float]:
    walls, cpus = [], []
    for _ in range(repeat):
        w, c = time.perf_counter(), time.process_time()
        fn(*args)
        walls.append(time.perf_counter() - w)
        cpus.append(time.process_time() - c)
    return min(walls), min(cpus)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--vocab-size", type=int, default=8000)
    p.add_argument("--max-chars", type=int, default=500_000, help="per source file")
    p.add_argument("--repeat", type=int, default=2)
    p.add_argument("--phrase-fraction", type=float, default=0.25)
    p.add_argument("--data", type=Path, default=None, help="the shared data: train on --langs' sources there")
    p.add_argument("--langs", default=",".join(bench_multiscript.SOURCES), help="with --data, comma-separated")
    args = p.parse_args()
    specs = bench_multiscript.sources(args.data, args.langs.split(",")) if args.data else SOURCES
    sources = [parse_text_arg(s) for s in specs]
    with tempfile.TemporaryDirectory() as tmp:
        prepared = sampling.prepare_text(sources, Path(tmp), max_chars_per_source=args.max_chars, progress=False)
        shares = sampling.resolve_shares({k: v.train_chars for k, v in prepared.languages.items()})
        lines = list(sampling.iter_sample(prepared, sampling.sample_budgets(prepared, shares, None)))
    peer = best_of(args.repeat, raw_hf, lines, args.vocab_size, hf_pre_tokenizer())
    gpt2 = best_of(args.repeat, raw_hf, lines, args.vocab_size, pre_tokenizers.ByteLevel(add_prefix_space=False))
    ours = best_of(args.repeat, script_aware, sources, args.vocab_size, args.max_chars, 0.0)
    byte_level = best_of(args.repeat, script_aware, sources, args.vocab_size, args.max_chars, 0.0, False)
    phrase = best_of(1, script_aware, sources, args.vocab_size, args.max_chars, args.phrase_fraction)
    print(f"text: {sum(map(len, lines)):,} characters of {', '.join(prepared.languages)}, vocabulary {args.vocab_size}")
    print(f"raw BpeTrainer, same split:        wall {peer[0]:.2f} s, cpu {peer[1]:.2f} s")
    print(f"raw BpeTrainer, GPT-2 ByteLevel:   wall {gpt2[0]:.2f} s, cpu {gpt2[1]:.2f} s (information)")
    print(f"script-aware machinery, end to end: wall {ours[0]:.2f} s, cpu {ours[1]:.2f} s (whole graphemes)")
    print(f"  the same with --whole-graphemes off: wall {byte_level[0]:.2f} s, cpu {byte_level[1]:.2f} s (information)")
    print(f"ratio script-aware / raw: wall {ours[0] / peer[0]:.2f}, cpu {ours[1] / peer[1]:.2f} (goal <= 1.2); "
          f"against the GPT-2 pre-tokenizer: cpu {ours[1] / gpt2[1]:.2f}")
    print(f"with phrase merges ({args.phrase_fraction:.0%} of the vocabulary), information: wall {phrase[0]:.2f} s, "
          f"cpu {phrase[1]:.2f} s ({phrase[1] / peer[1]:.2f}x the raw peer)")


if __name__ == "__main__":
    main()
