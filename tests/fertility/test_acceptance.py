"""Acceptance on real parallel text (../shared tatoeba-bn-en): the report agrees with an independent count.

The independent count is plain ``len(text)`` over ``len(encode(text))`` with the tokenizer libraries used
directly from ../shared/tokenizers (tiktoken for cl100k/o200k, HF tokenizers for GPT-2 as in shared/tokenizers/README.md), per line.
"""

import gzip
import hashlib

import pytest

import fertility

NAMES = ("gpt2", "cl100k_base", "o200k_base")


@pytest.fixture(scope="module")
def independent(shared_tokenizers):
    """Token counters built straight from the libraries, as shared/tokenizers/README.md loads them."""
    tok_dir = shared_tokenizers
    import tiktoken
    from tiktoken.load import load_tiktoken_bpe
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers

    from fertility.tokenizers import CL100K_PATTERN, O200K_PATTERN

    gpt2 = Tokenizer(models.BPE.from_file(str(tok_dir / "gpt2" / "vocab.json"), str(tok_dir / "gpt2" / "merges.txt")))
    gpt2.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    gpt2.decoder = decoders.ByteLevel()
    cl100k = tiktoken.Encoding("cl100k", pat_str=CL100K_PATTERN, special_tokens={},
                               mergeable_ranks=load_tiktoken_bpe(str(tok_dir / "cl100k_base" / "cl100k_base.tiktoken")))
    o200k = tiktoken.Encoding("o200k", pat_str=O200K_PATTERN, special_tokens={},
                              mergeable_ranks=load_tiktoken_bpe(str(tok_dir / "o200k_base" / "o200k_base.tiktoken")))
    return {
        "gpt2": lambda lines: sum(len(e.ids) for e in gpt2.encode_batch(lines, add_special_tokens=False)),
        "cl100k_base": lambda lines: sum(map(len, cl100k.encode_ordinary_batch(lines))),
        "o200k_base": lambda lines: sum(map(len, o200k.encode_ordinary_batch(lines))),
    }


@pytest.mark.shared
@pytest.mark.slow
def test_tatoeba_chars_per_token_premium_and_traps(shared_dir, shared_tokenizers, shared_tok, gpt2, o200k,
                                                   independent):
    folder = shared_dir / "data" / "parallel" / "tatoeba-bn-en"
    files = {"bn": folder / "ben_Beng.txt.gz", "en": folder / "eng_Latn.txt.gz"}
    lines = {lang: [x for x in gzip.decompress(p.read_bytes()).decode().split("\n") if x.strip()]
             for lang, p in files.items()}
    # the shipped gpt2 and o200k (loaded once per session) are the shared files: same bytes (o200k gzipped)
    shared = shared_tokenizers
    assert o200k.fingerprint == hashlib.sha256((shared / "o200k_base" / "o200k_base.tiktoken").read_bytes()).hexdigest()
    gpt2_bytes = (shared / "gpt2" / "vocab.json").read_bytes() + (shared / "gpt2" / "merges.txt").read_bytes()
    assert gpt2.fingerprint == hashlib.sha256(gpt2_bytes).hexdigest()
    report = fertility.analyze([gpt2, shared_tok("cl100k_base"), o200k],
                               [fertility.TextSource(lang, str(p)) for lang, p in files.items()],
                               parallel={lang: str(p) for lang, p in files.items()}, reference="en", progress=False)
    count = independent
    for name in NAMES:
        t = report.tokenizer(name)
        tokens = {lang: count[name](lines[lang]) for lang in files}
        for lang in files:
            independent = sum(map(len, lines[lang])) / tokens[lang]
            assert t.languages[lang].chars_per_token == pytest.approx(independent, rel=0.01)
            assert t.parallel[lang].chars_per_token == pytest.approx(independent, rel=0.01)
        assert t.parallel["bn"].premium == pytest.approx(tokens["bn"] / tokens["en"], rel=0.02)
    # Bengali: GPT-2 and cl100k are traps because of their pre-tokenizer; o200k's is not
    for name in ("gpt2", "cl100k_base"):
        causes = [x.cause for x in report.tokenizer(name).traps if x.script == "Bengali"]
        assert any("pre-tokenizer splits combining marks" in c for c in causes), causes
        assert report.tokenizer(name).scripts["Bengali"].pretoken_ceiling < 2.5
    o200k = report.tokenizer("o200k_base")
    assert o200k.scripts["Bengali"].pretoken_ceiling > 4  # short everyday sentences, many dandas
    assert not [x for x in o200k.traps if x.script == "Bengali" and x.rule != "broken_graphemes"]


@pytest.mark.shared
def test_o200k_bengali_ceiling_on_prose(shared_dir, o200k):
    # Long-form prose (measurement only; this file has no licence and is never committed or copied)
    source = fertility.TextSource("bn", str(shared_dir / "data" / "bn" / "blog-sachalayatan.txt.gz"))
    report = fertility.analyze([o200k], [source], max_chars=150_000, progress=False)
    assert report.tokenizers[0].scripts["Bengali"].pretoken_ceiling > 5


@pytest.mark.shared
@pytest.mark.slow
def test_monolingual_prose_and_wikipedia_agree_with_independent_count(shared_dir, shared_tok, gpt2, o200k,
                                                                      independent):
    files = {"bn": shared_dir / "data" / "bn" / "blog-sachalayatan.txt.gz",
             "en": shared_dir / "data" / "en" / "wiki-en-chinapedia.txt.gz"}
    max_chars = 60_000
    report = fertility.analyze([gpt2, shared_tok("cl100k_base"), o200k],
                               [fertility.TextSource(lang, str(p)) for lang, p in files.items()],
                               max_chars=max_chars, progress=False)
    count = independent
    for lang, path in files.items():
        lines, chars = [], 0
        with gzip.open(path, "rt", encoding="utf-8") as f:
            for line in f:
                if chars >= max_chars:
                    break
                if line.strip():
                    lines.append(line.rstrip("\n"))
                    chars += len(lines[-1])
        for name in NAMES:
            independent = chars / count[name](lines)
            assert report.tokenizer(name).languages[lang].chars_per_token == pytest.approx(independent, rel=0.01)
