"""`pretrain export` on every transformers the project supports: the folder loads with the oldest (the Makefile
installs it in .venv/compat/transformers-oldest) and the newest (the venv's), pads a batch, generates, and stops
generating at the token that ends a document in the shards: BOS (`pretrain.release.tokenizer.TokenRoles`)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import torch
from packaging.requirements import Requirement
from packaging.version import Version

from corpus.read.normalize import normalize
from corpus.shards.format import Manifest, read_shard
from fertility.text import iter_documents
from fertility.tokenizers import load_tokenizer
from pretrain.cli import main
from pretrain.release.export import export_checkpoint, model_from_checkpoint
from pretrain.release.tokenizer import export_tokenizer
from pretrain.train.checkpoint import latest_checkpoint, load_checkpoint
from tokenizers_train.backends import train_naive

ROOT = Path(__file__).resolve().parents[2]
COMPAT = ROOT / ".venv" / "compat" / "transformers-oldest"
SEQ_LEN = 32  # the micro runs' model.block_size (tests/pretrain/conftest.py)
SPECIAL_TEXT = "a <|bos|> b <|eos|> c"

# Run with the transformers under test: everything it reports, asserted by the test (one process per version).
PROBE = r"""
import json, sys
import torch
import transformers
from transformers import AutoModelForCausalLM, AutoTokenizer

folder, text = sys.argv[1], sys.argv[2]
tok = AutoTokenizer.from_pretrained(folder)
model = AutoModelForCausalLM.from_pretrained(folder).eval()
prompts = ["short", "a longer prompt, several tokens long"]
batch = tok(prompts, padding=True, return_tensors="pt")
with torch.no_grad():
    # Left padding: each row's positions count its own tokens only (what generate() does too).
    positions = (batch["attention_mask"].cumsum(-1) - 1).clamp(min=0)
    padded = model(**batch, position_ids=positions).logits[:, -1]
    alone = torch.cat([model(**tok([p], return_tensors="pt")).logits[:, -1] for p in prompts])
    generated = model.generate(**batch, max_new_tokens=4, do_sample=False)
    # A model made to say the end token first: generation must stop right after it, before max_new_tokens.
    stopped = model.generate(**tok([prompts[1]], return_tensors="pt"), max_new_tokens=8, do_sample=False,
                             prefix_allowed_tokens_fn=lambda row, ids: [tok.eos_token_id])
gc = model.generation_config
print(json.dumps({
    "version": transformers.__version__, "class": type(model).__name__,
    "tok": {"bos": tok.bos_token_id, "eos": tok.eos_token_id, "pad": tok.pad_token_id,
            "model_max_length": tok.model_max_length, "padding_side": tok.padding_side},
    "config": {"bos": model.config.bos_token_id, "eos": model.config.eos_token_id, "pad": model.config.pad_token_id,
               "use_cache": model.config.use_cache},
    "generation": {"bos": gc.bos_token_id, "eos": gc.eos_token_id, "pad": gc.pad_token_id},
    "batch_keys": sorted(batch), "input_ids": batch["input_ids"].tolist(), "mask": batch["attention_mask"].tolist(),
    "padding_error": float((padded - alone).abs().max() / alone.abs().max()),
    "long_ids": tok(prompts[1]).input_ids, "long_logits": alone[1].tolist(),
    "generated_shape": list(generated.shape), "stopped": stopped[0].tolist(),
    "special": {"call": tok(text).input_ids, "encode": tok.encode(text),
                "decoded": tok.decode(tok(text).input_ids, skip_special_tokens=True)},
}))
"""


def _texts(sample_dir: Path) -> dict[str, list[Path]]:
    return {"bn": [sample_dir / "bn" / "literature-bnarchive.txt.gz"],
            "en": [sample_dir / "en" / "wiki-en-chinapedia.txt.gz"]}


@pytest.fixture(scope="module")
def trained(tmp_path_factory, sample_dir, micro) -> dict[str, Path]:
    """A 3-step micro run on shards of a tokenizer trained by `tokenizers-train` (its <|bos|>, <|eos|> and
    <|pad|>: an EOS the shards never hold, and a pad token of its own), with a RoPE base transformers 4 does not
    assume, and its export."""
    root = tmp_path_factory.mktemp("export_compat")
    lines = [normalize(d.text) for paths in _texts(sample_dir).values()
             for d in iter_documents(str(paths[0]), max_chars=30000)]
    tokenizer = train_naive(512, lambda: iter(lines), root / "tokenizer", show_progress=False)
    shards = micro.write_real(root / "shards", _texts(sample_dir), train_chars=20000, val_chars=3000,
                              tokenizer=str(tokenizer))
    assert main(micro.args(shards, root / "run", 3, "--set", "model.rope_theta=500000")) == 0
    checkpoint = latest_checkpoint(root / "run")
    return {"shards": shards, "checkpoint": checkpoint, "export": export_checkpoint(checkpoint, root / "hf")}


def _read(folder: Path, name: str) -> dict:
    return json.loads((folder / name).read_text(encoding="utf-8"))


def test_the_end_token_is_the_token_that_starts_every_document_in_the_shards(trained):
    manifest = Manifest.load(trained["shards"])
    bos, eos = manifest.tokenizer.bos_id, manifest.tokenizer.eos_id
    assert eos is not None and eos != bos  # the tokenizer has an EOS of its own ...
    for shard in manifest.shards:
        tokens = read_shard(trained["shards"] / shard.file)
        assert tokens[0] == bos and int((tokens == bos).sum()) == shard.documents
        assert eos not in tokens  # ... that no document ends with: the model never learned to say it
    out = trained["export"]
    tok = load_tokenizer(manifest.tokenizer.spec)
    config, generation = _read(out, "config.json"), _read(out, "generation_config.json")
    tok_config = _read(out, "tokenizer_config.json")
    pad = tok.token_to_id("<|pad|>")
    assert (config["bos_token_id"], config["eos_token_id"], config["pad_token_id"]) == (bos, bos, pad)
    assert (generation["bos_token_id"], generation["eos_token_id"], generation["pad_token_id"]) == (bos, bos, pad)
    assert (tok_config["bos_token"], tok_config["eos_token"], tok_config["pad_token"]) == ("<|bos|>", "<|bos|>",
                                                                                           "<|pad|>")
    assert tok_config["tokenizer_class"] == "PreTrainedTokenizerFast" and tok_config["split_special_tokens"] is True
    assert tok_config["model_max_length"] == SEQ_LEN == config["max_position_embeddings"]
    assert config["use_cache"] is True and config["rope_theta"] == 500000
    assert _read(out, "export.json")["special_tokens"] == {"bos": "<|bos|>", "eos": "<|bos|>", "pad": "<|pad|>"}
    card = (out / "README.md").read_text(encoding="utf-8")
    assert f"`eos_token_id` {bos}" in card and f"`<|pad|>` (id {pad}), the tokenizer's pad token" in card


def test_a_tokenizer_without_a_pad_token_pads_with_bos():
    gpt2 = load_tokenizer("gpt2")
    roles = export_tokenizer("gpt2", gpt2.fingerprint, gpt2.bos_id).roles
    assert (roles.bos, roles.pad, roles.pad_id) == ("<|endoftext|>", "<|endoftext|>", gpt2.bos_id)
    assert not roles.pad_is_own


def _oldest_floor() -> Version:
    """The lowest transformers pyproject.toml accepts."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    for spec in project["dependencies"]:
        req = Requirement(spec)
        if req.name == "transformers":
            return min(Version(s.version) for s in req.specifier if s.operator in (">=", "=="))
    raise AssertionError("pyproject.toml declares no transformers")


def _probe(folder: Path, oldest: bool) -> dict:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false",
           "OMP_NUM_THREADS": "1"}
    if oldest:
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(COMPAT), env.get("PYTHONPATH")) if p)
    done = subprocess.run([sys.executable, "-c", PROBE, str(folder), SPECIAL_TEXT], env=env, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("which", ["newest", "oldest"])
def test_the_export_loads_pads_generates_and_stops_on_each_supported_transformers(trained, which):
    if which == "oldest" and not (COMPAT / "transformers").is_dir():
        reason = f"{COMPAT.relative_to(ROOT)} is absent: `make test` installs the oldest supported transformers there"
        if os.environ.get("CI"):
            pytest.fail(reason)
        pytest.skip(reason)
    got = _probe(trained["export"], which == "oldest")
    version = Version(got["version"])
    if which == "oldest":
        assert version.major == 4 and version >= _oldest_floor(), got["version"]
    else:
        import transformers
        assert got["version"] == transformers.__version__
    manifest = Manifest.load(trained["shards"])
    bos = manifest.tokenizer.bos_id
    pad = load_tokenizer(manifest.tokenizer.spec).token_to_id("<|pad|>")
    assert got["class"] == "LlamaForCausalLM"
    assert got["tok"] == {"bos": bos, "eos": bos, "pad": pad, "model_max_length": SEQ_LEN, "padding_side": "left"}
    assert got["config"] == {"bos": bos, "eos": bos, "pad": pad, "use_cache": True}
    assert got["generation"] == {"bos": bos, "eos": bos, "pad": pad}
    # The padded batch: only what the model takes, the short prompt padded on the left, masked out, harmless.
    assert got["batch_keys"] == ["attention_mask", "input_ids"]
    short, long = got["input_ids"]
    assert short[0] == pad and got["mask"][0][0] == 0 and long[0] == bos and all(got["mask"][1])
    assert got["padding_error"] <= 1e-4
    width = len(long)
    assert got["generated_shape"][0] == 2 and width < got["generated_shape"][1] <= width + 4
    assert got["stopped"] == got["long_ids"] + [bos]  # one new token, the end token, and no more
    # The same function as the checkpoint (a RoPE base transformers 4 would silently replace included).
    model = model_from_checkpoint(load_checkpoint(trained["checkpoint"]), trained["checkpoint"]).eval()
    with torch.no_grad():
        expected = model(torch.tensor([got["long_ids"]]))[0][0, -1]
    assert float((torch.tensor(got["long_logits"]) - expected).abs().max()) <= 1e-4 * float(expected.abs().max())
    # A special token's string in the text is text: BOS only where the tokenizer puts it, first.
    for ids in (got["special"]["call"], got["special"]["encode"]):
        assert ids[0] == bos and bos not in ids[1:]
    assert got["special"]["decoded"] == SPECIAL_TEXT


def test_text_holding_special_token_strings_scores_the_same_on_the_checkpoint_and_its_export(trained, tmp_path):
    text = tmp_path / "special.txt"
    text.write_text("আমার সোনার বাংলা <|bos|> আমি তোমায় ভালোবাসি।\nThe end <|eos|> is not <|pad|> here.\n",
                    encoding="utf-8")
    scores = {}
    for kind, model in (("checkpoint", trained["checkpoint"]), ("hf", trained["export"])):
        out = tmp_path / f"{kind}.json"
        assert main(["eval", f"--{kind}", str(model), "--text", f"bn={text}", "--out", str(out), "--device", "cpu"]) == 0
        scores[kind] = _read(tmp_path, out.name)["text"]["languages"]["bn"]
    a, b = scores["checkpoint"], scores["hf"]
    assert a["tokens"] == b["tokens"] and a["bytes"] == b["bytes"]
    assert abs(a["bits_per_byte"] - b["bits_per_byte"]) <= 1e-3
