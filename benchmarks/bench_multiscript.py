"""Seven languages, one vocabulary: our default trainer against HF's ParityBpeTrainer, a plain BpeTrainer and
the published tokenizers, on held-out text. One command:

    python benchmarks/bench_multiscript.py [--vocab-size 16000] [--max-chars-per-source 300000] [--out FILE.json]
        [--keep DIR] [--ours-args '--phrase-fraction 0']

The full-size run (issue 22's acceptance: 128k, every character of the shared text; 13 minutes on one
thread, ours 2-3 of them):

    RAYON_NUM_THREADS=1 python benchmarks/bench_multiscript.py --vocab-size 128000 --max-chars-per-source 0 --out bench_128k.json

Every trained tokenizer sees the same text at the same vocabulary. The text is every source of the seven
languages under ``--data`` (the team's shared data: ``bn/``, ``en/`` and, for hi, ta, te, ml and ur, every
source under ``multi/`` but xquad), read through :func:`tokenizers_train.sampling.prepare_text`, which holds
aside every 50th block of 20 documents of each source. The trainers:

* ``ours``: the ``tokenizers-train`` command's defaults (balance, whole graphemes, phrase merges) on those
  sources; its time is the whole run (probes, rounds, measurements).
* ``parity-base`` and ``parity-window``: ``tokenizers.trainers.ParityBpeTrainer`` (both variants) given each
  language's training text as its own iterator and ``ratio`` = the UTF-8 bytes per character of that text:
  the trainer equalises compression in pre-tokenizer units (bytes) divided by ``ratio``, i.e. characters
  per token, our balance's own target (there is no parallel dev set for the seven languages here). Same
  pre-tokenizer as ours (script-aware split + ByteLevel), vocabulary padded to the same size.
* ``bpe-fair``: a plain ``BpeTrainer`` on all the training text with the same script-aware pre-tokenizer.
* the reference tokenizers in ``--tokenizer-dir`` (Gemma 3, o200k, Llama 3, ...; larger vocabularies).

Figures, all on text no trainer saw: chars/token per language on the held-out slice; the premium against
English on held-out *parallel* text where there is some (Tatoeba bn-en, XQuAD hi-en), else on the project's
shipped Tatoeba pairs (marked ``t``), else (marked ``~``) the proxy ``ratio * cpt(en) / cpt(lang)`` on the
held-out slices, ``ratio`` the language's length ratio to English (:mod:`fertility.length_ratios`; 1 where it
has none); the maximum premium and the Gini coefficient (TokEval) of the per-language token costs of the
same content (the premiums, English 1); and each trainer's time and peak memory: every trainer runs in a
fresh process of its own, so its peak resident set is its own (it includes the ``baseline_rss_mib`` that
a process holds once the modules are imported, the same for every trainer). The table is printed and
written as JSON.

At Gemma 3's size, ours against it and the peers at the same vocabulary:

    RAYON_NUM_THREADS=1 python benchmarks/bench_multiscript.py --vocab-size 262144 --max-chars-per-source 0 --out bench_262k.json
"""

from __future__ import annotations

import argparse
import multiprocessing
import resource
import shlex
import shutil
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

import fertility
from common.cli import positive_int
from common.fileio import write_json
from common.outdir import check_output_dir
from common.paths import check_output_file
from fertility.length_ratios import ENGLISH, SAMPLE_DIR, length_ratio, sample_code
from fertility.premium import gini, premium, read_parallel
from fertility.text import TextSource
from fertility.tokenizers import available_known
from tokenizers_train import backends, sampling
from tokenizers_train.cli import build_parser, config_from
from tokenizers_train.pretokenize import hf_pre_tokenizer
from tokenizers_train.run import run as run_command

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared"
# Training sources per language, relative to --data (xquad and the parallel sets are kept for measuring).
SOURCES = {
    "bn": ["bn/blog-sachalayatan", "bn/poems-pd-banglakosh", "bn/literature-bnarchive"],
    "hi": ["multi/sipc-wiki/hin_Deva", "multi/dakshina-wiki/hin_Deva"],
    "ta": ["multi/sipc-wiki/tam_Taml", "multi/dakshina-wiki/tam_Taml", "multi/commonvoice-sentences/tam_Taml"],
    "te": ["multi/sipc-wiki/tel_Telu", "multi/dakshina-wiki/tel_Telu", "multi/wikisource-te-classical/tel_Telu"],
    "ml": ["multi/sipc-wiki/mal_Mlym", "multi/smc-wiki/mal_Mlym", "multi/smc-articles/mal_Mlym",
           "multi/smc-cmokerala/mal_Mlym", "multi/commonvoice-sentences/mal_Mlym"],
    "ur": ["multi/sipc-wiki/urd_Arab", "multi/dakshina-wiki/urd_Arab", "multi/commonvoice-sentences/urd_Arab"],
    "en": ["en/wiki-en-chinapedia"],
}
# Held-out parallel text: (language, its file, English's file), relative to --data.
PARALLEL = {
    "bn": ("parallel/tatoeba-bn-en/ben_Beng", "parallel/tatoeba-bn-en/eng_Latn"),
    "hi": ("multi/xquad/hin_Deva.contexts", "multi/xquad/eng_Latn.contexts"),
}
REFERENCES = ["gemma3", "o200k_base", "llama3", "qwen2.5", "gemma"]
# A language without held-out parallel text above is measured on the project's shipped Tatoeba pairs with English
# (fertility.length_ratios.SAMPLE_DIR): the sample the trainer's length ratios come from, so its premiums there
# say whether the balance holds on real sentence pairs, not whether the ratios transfer to other text.


# FLORES codes of the shared data's multi/ folders, for --every-source.
CODES = {"bn": "ben_Beng", "hi": "hin_Deva", "ta": "tam_Taml", "te": "tel_Telu", "ml": "mal_Mlym", "ur": "urd_Arab",
         "en": "eng_Latn"}


def every_source(data: Path, lang: str) -> list[Path]:
    """Every shared source of ``lang``: its own folder (``bn/``, ``en/``: the everyday text too) and every
    ``multi/*/CODE`` file but XQuAD's (held out, the parallel text below)."""
    own = sorted((data / lang).glob("*.txt.gz"))
    return own + [p for p in sorted(data.glob(f"multi/*/{CODES[lang]}.txt.gz")) if p.parent.name != "xquad"]


def sources(data: Path, langs: list[str], every: bool = False) -> list[str]:
    """``LANG=PATH`` for every training source found under ``data`` (the table above, or with ``every``
    :func:`every_source`); a language with none is an error."""
    specs = []
    for lang in langs:
        if lang not in SOURCES:
            raise SystemExit(f"bench_multiscript: unknown language {lang!r}; expected some of {', '.join(SOURCES)}")
        found = (every_source(data, lang) if every else
                 [data / f"{rel}.txt.gz" for rel in SOURCES[lang] if (data / f"{rel}.txt.gz").is_file()])
        if not found:
            raise SystemExit(f"bench_multiscript: no {lang} source under {data} (expected {SOURCES[lang][0]}.txt.gz)")
        specs += [f"{lang}={path}" for path in found]
    return specs


def utf8_bytes_per_char(path: Path, limit: int = 2_000_000) -> float:
    with open(path, encoding="utf-8") as f:
        text = f.read(limit)
    return len(text.encode("utf-8")) / max(1, len(text))


def lines_of(path: Path):
    with open(path, encoding="utf-8") as f:
        for line in f:
            yield line.rstrip("\n")


def _save(tok: Tokenizer, vocab_size: int, out: Path) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    return backends.hf_trainer(lambda config, lines: tok)(backends.TrainConfig(vocab_size=vocab_size), None, out)


def train_parity(prepared: sampling.PreparedText, vocab_size: int, variant: str, out: Path) -> Path:
    langs = list(prepared.languages)
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = hf_pre_tokenizer()
    tok.decoder = decoders.ByteLevel()
    merges = vocab_size - backends.BYTE_ALPHABET - len(backends.SPECIAL_TOKENS)
    trainer = trainers.ParityBpeTrainer(num_merges=merges, variant=variant, min_frequency=2,
                                        special_tokens=backends.SPECIAL_TOKENS, show_progress=False,
                                        initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    ratio = [utf8_bytes_per_char(prepared.languages[k].train_path) for k in langs]
    trainer.train_from_iterator(tok, train_iterators=[lines_of(prepared.languages[k].train_path) for k in langs],
                                ratio=ratio)
    return _save(tok, vocab_size, out)


def train_plain(prepared: sampling.PreparedText, vocab_size: int, out: Path) -> Path:
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = hf_pre_tokenizer()
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, min_frequency=2, special_tokens=backends.SPECIAL_TOKENS,
                                  show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator((line for lt in prepared.languages.values() for line in lines_of(lt.train_path)), trainer)
    return _save(tok, vocab_size, out)


def peak_rss_mib() -> float:
    """This process's own peak resident set, MiB: Linux's ``VmHWM``. Not ``ru_maxrss``: a spawned process
    keeps the one its parent had when it forked (173 MiB for an idle child of the test session), since the
    maximum survives ``exec``. Elsewhere ``ru_maxrss`` (KiB on Linux, bytes on macOS: read as KiB)."""
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            return next(int(line.split()[1]) for line in f if line.startswith("VmHWM:")) / 1024
    except OSError:
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _timed(train, *args):
    start = time.perf_counter()
    result = train(*args)
    return result, time.perf_counter() - start, peak_rss_mib()


def in_fresh_process(train, *args):
    """``train(*args)`` in a new process (spawned: nothing of this one's memory or threads is shared), as
    ``(result, seconds, peak RSS MiB of that process)``."""
    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
        return pool.submit(_timed, train, *args).result()


def _nothing() -> None:
    """The baseline: what a fresh process holds with this module imported and nothing trained."""


def train_ours(argv: list[str]) -> tuple[Path, dict]:
    """The tokenizers-train command on ``argv``: its tokenizer, and its rounds as the table's JSON keeps them."""
    result = run_command(config_from(build_parser().parse_args(argv)))
    rounds = result.report["rounds"]
    return result.tokenizer, {
        "rounds": [{k: r[k] for k in ("probe", "shares", "chars_per_token", "met", "seconds", "sample_chars")}
                   for r in rounds], "probes": sum(r["probe"] for r in rounds),
        "chosen_round": result.report["chosen_round"], "notes": result.report["data"]["notes"]}


def measure(tok: fertility.Tokenizer, validation: dict[str, list[str]], parallel: dict, langs: list[str]) -> dict:
    """chars/token on the held-out slices, premiums (``parallel``: language -> (its text with English's, "parallel"
    or "sample"), else the ~proxy), max premium, Gini."""
    cpt = {}
    for lang, docs in validation.items():
        tokens = sum(map(len, tok.encode_ids(docs)))
        cpt[lang] = sum(map(len, docs)) / tokens
    prem, source = {"en": 1.0}, {"en": "reference"}
    for lang in langs:
        if lang == "en":
            continue
        if lang in parallel:
            text, source[lang] = parallel[lang]
            prem[lang] = premium(tok, text, "en")[lang].premium
        else:
            prem[lang] = length_ratio(lang).ratio * cpt["en"] / cpt[lang]
            source[lang] = "proxy"
    others = [k for k in prem if k != "en"]
    par = [k for k in prem if source[k] in ("parallel", "sample")]
    return {
        "vocab_size": tok.vocab_size,
        "chars_per_token": {k: round(v, 4) for k, v in cpt.items()},
        "premium": {k: round(v, 4) for k, v in prem.items()},
        "premium_source": source,
        "max_premium": round(max(prem[k] for k in others), 4) if others else None,
        "gini": round(gini(list(prem.values())), 4),
        "max_premium_parallel_only": round(max(prem[k] for k in par), 4) if par else None,
        "gini_parallel_only": round(gini([1.0] + [prem[k] for k in par]), 4) if par else None,
    }


def table(results: dict, langs: list[str]) -> str:
    head = (["tokenizer", "vocab", "train s", "peak MiB"] + [f"{k} cpt" for k in langs]
            + [f"{k} prem" for k in langs if k != "en"] + ["max prem", "Gini", "Gini (par.)"])
    rows = [head]
    for name, r in results.items():
        prem = [{"parallel": "", "sample": "t"}.get(r["premium_source"][k], "~") + f"{r['premium'][k]:.3f}"
                for k in langs if k != "en"]
        rows.append([name, f"{r['vocab_size']:,}", f"{r['seconds']:.0f}" if r.get("seconds") is not None else "-",
                     f"{r['peak_rss_mib']:,.0f}" if r.get("peak_rss_mib") is not None else "-"]
                    + [f"{r['chars_per_token'][k]:.3f}" for k in langs] + prem
                    + [f"{r['max_premium']:.3f}", f"{r['gini']:.4f}",
                       f"{r['gini_parallel_only']:.4f}" if r["gini_parallel_only"] is not None else "-"])
    widths = [max(len(row[i]) for row in rows) for i in range(len(head))]
    return "\n".join("  ".join(c.rjust(w) for c, w in zip(row, widths, strict=True)) for row in rows)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--vocab-size", type=positive_int, default=16000)
    p.add_argument("--max-chars-per-source", type=int, default=300_000, help="0: every character")
    p.add_argument("--every-source", action="store_true",
                   help="every shared source of each language (the everyday text included), not the table's subset")
    p.add_argument("--data", type=Path, default=SHARED / "data")
    p.add_argument("--tokenizer-dir", type=Path, default=SHARED / "tokenizers")
    p.add_argument("--langs", default=",".join(SOURCES), help="comma-separated, from " + ",".join(SOURCES))
    p.add_argument("--peers", default="ours,parity-base,parity-window,bpe-fair,references")
    p.add_argument("--out", type=Path, default=None, help="JSON file for the figures")
    p.add_argument("--keep", type=Path, default=None, metavar="DIR",
                   help="a new folder to keep the trained tokenizers in (DIR/NAME/tokenizer.json)")
    p.add_argument("--ours-args", default="", metavar="'OPTIONS'",
                   help="more tokenizers-train options for ours (one string, e.g. '--max-repeats 3'): not the default")
    args = p.parse_args(argv)
    langs = args.langs.split(",")
    peers = args.peers.split(",")
    if args.out:
        check_output_file(args.out)
    if args.keep:
        check_output_dir(args.keep)
    max_chars = args.max_chars_per_source or None
    specs = sources(args.data, langs, every=args.every_source)
    parallel = {}
    for lang, (xx, en) in PARALLEL.items():
        if lang in langs and "en" in langs and (args.data / f"{xx}.txt.gz").is_file():
            parallel[lang] = (read_parallel({lang: f"{args.data / xx}.txt.gz", "en": f"{args.data / en}.txt.gz"}),
                              "parallel")
    for lang in langs:
        code = sample_code(lang)
        if lang not in parallel and lang != "en" and "en" in langs and code and (SAMPLE_DIR / code).is_dir():
            parallel[lang] = (read_parallel({lang: f"{SAMPLE_DIR / code / code}.txt.gz",
                                             "en": f"{SAMPLE_DIR / code / ENGLISH}.txt.gz"}), "sample")
    results: dict[str, dict] = {}
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        prepared = sampling.prepare_text([TextSource(*s.split("=", 1)) for s in specs], tmp / "prepared",
                                         max_chars_per_source=max_chars, progress=False)
        validation = {k: lt.validation for k, lt in prepared.languages.items()}
        info = {k: {"train_chars": lt.train_chars, "validation_chars": sum(map(len, lt.validation))}
                for k, lt in prepared.languages.items()}
        print("text: " + ", ".join(f"{k} {v['train_chars']:,} train / {v['validation_chars']:,} held out"
                                   for k, v in info.items()), file=sys.stderr, flush=True)
        baseline = round(in_fresh_process(_nothing)[2])
        jobs = {}
        if "ours" in peers:
            argv_ours = [a for s in specs for a in ("--text", s)] + [
                "--vocab-size", str(args.vocab_size), "--out", str(tmp / "ours"), "--no-progress",
                *shlex.split(args.ours_args)]
            if max_chars:
                argv_ours += ["--max-chars-per-source", str(max_chars)]
            jobs["ours"] = (train_ours, argv_ours)
        for variant in ("base", "window"):
            jobs[f"parity-{variant}"] = (train_parity, prepared, args.vocab_size, variant, tmp / f"parity-{variant}")
        jobs["bpe-fair"] = (train_plain, prepared, args.vocab_size, tmp / "bpe-fair")
        for name, job in jobs.items():
            if name not in peers:
                continue
            result, seconds, peak = in_fresh_process(*job)
            path, extra = result if name == "ours" else (result, {})
            print(f"{name}: trained in {seconds:.0f} s, peak {peak:,.0f} MiB", file=sys.stderr, flush=True)
            if args.keep:
                (args.keep / name).mkdir(parents=True, exist_ok=True)
                shutil.copyfile(path, args.keep / name / path.name)
            results[name] = {**measure(fertility.load_tokenizer(str(path)), validation, parallel, langs),
                             "seconds": round(seconds, 1), "peak_rss_mib": round(peak), **extra}
    if "references" in peers:
        for name in available_known(args.tokenizer_dir):
            if name in REFERENCES:
                tok = fertility.load_tokenizer(name, args.tokenizer_dir)
                results[name] = {**measure(tok, validation, parallel, langs), "seconds": None}
    print(table(results, langs))
    print("prem: tokens of the same content over English's (parallel: " + ", ".join(
        f"{k} {PARALLEL[k][0].split('/')[1]}" for k in parallel if k in PARALLEL) + "; t = the shipped Tatoeba pairs; "
          "~ = ratio * cpt(en)/cpt(lang) on held-out slices, ratio the length ratio of fertility.length_ratios); "
          "Gini over the premiums (English 1); Gini (par.) over English and the parallel languages only; "
          f"peak MiB: the training process's peak RSS, {baseline:,} MiB of it the imports")
    if args.out:
        write_json(args.out, {"arguments": {k: str(v) for k, v in vars(args).items()}, "text": info,
                              "baseline_rss_mib": baseline, "tokenizers": results})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
