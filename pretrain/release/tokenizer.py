"""The tokenizer of a ``pretrain export``: the training tokenizer, checked by its sha256, that prepends BOS as
training did, and the special tokens' roles the export names (end of sequence, padding)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from common.errors import InputError
from common.fileio import atomic_write_text, write_json


class ExportError(InputError):
    """A checkpoint or tokenizer that cannot be exported; the message names the file and the reason."""


# The names a pad token goes by among a tokenizer's special tokens (tokenizers-train writes <|pad|>).
PAD_NAMES = ("<|pad|>", "<pad>", "[PAD]", "<|padding|>")


@dataclass(frozen=True)
class TokenRoles:
    """The special tokens the export names in config.json, generation_config.json and tokenizer_config.json.

    The end of sequence is the BOS token. The shards hold documents back to back, each one starting with BOS
    and none ending with an EOS (`corpus.pack`), and training scores every next token, the ones across a
    document boundary included: after a document's last token the model learned to predict BOS. So BOS marks
    a document's end as well as its start, as GPT-2's one ``<|endoftext|>`` does, and generation stops on it.
    A tokenizer's own EOS (tokenizers-train's ``<|eos|>``) never occurs in the shards: the model never
    predicts it, and generation that waited for it would never stop.

    The pad token is the tokenizer's own (a special token named like one of ``PAD_NAMES``); a tokenizer without
    one (GPT-2) pads with BOS, an id the model knows, under an attention mask of 0, as is usual for GPT-2.
    """

    bos: str
    bos_id: int
    pad: str
    pad_id: int

    @property
    def pad_is_own(self) -> bool:
        return self.pad_id != self.bos_id


@dataclass
class ExportTokenizer:
    """The tokenizer of an export: a ``tokenizers.Tokenizer`` that prepends BOS like training did, its roles, and
    its name (the one every output of the pipeline gives it; its spec may be a path of the exporting machine)."""

    backend: Any  # tokenizers.Tokenizer
    roles: TokenRoles
    name: str

    def save(self, folder: Path, context: int) -> None:
        """``tokenizer.json`` and the ``tokenizer_config.json`` both transformers 4.57+ and 5 load it from.

        ``PreTrainedTokenizerFast`` is the class both name (transformers 5 writes ``TokenizersBackend``, a name
        4.x does not know). ``split_special_tokens``: a special token's string in the text (``<|bos|>``) is
        text, as it was when the shards were made (`fertility.tokenizers.hf`), not a control token: scores and
        generations on such text are the ones the model was trained for. ``model_max_length``: the sequence
        length the model was trained on. Padding on the left, where a decoder-only model's batched
        ``generate()`` needs it. Only ``input_ids`` and ``attention_mask`` go to the model (4.x would add
        ``token_type_ids``, which ``LlamaForCausalLM.generate`` refuses)."""
        r = self.roles
        atomic_write_text(folder / "tokenizer.json", self.backend.to_str())
        write_json(folder / "tokenizer_config.json", {
            "tokenizer_class": "PreTrainedTokenizerFast", "bos_token": r.bos, "eos_token": r.bos, "pad_token": r.pad,
            "model_max_length": context, "padding_side": "left", "split_special_tokens": True,
            "model_input_names": ["input_ids", "attention_mask"], "clean_up_tokenization_spaces": False})


def export_tokenizer(spec: str, expected_sha256: str, bos_id: int | None) -> ExportTokenizer:
    """The tokenizer ``spec``, checked against the sha256 the model was trained with, that prepends BOS."""
    from tokenizers import Tokenizer, processors

    from corpus.shards.format import TokenizerInfo, TokenizerMismatch
    from fertility.tokenizers import HFTokenizer
    from fertility.tokenizers.base import first_id

    try:
        tok = TokenizerInfo(spec=spec, sha256=expected_sha256, vocab_size=0, bos_id=bos_id).load()
    except TokenizerMismatch as e:
        raise ExportError(f"{e}; pass --tokenizer with the tokenizer the model was trained with") from None
    if not isinstance(tok, HFTokenizer):
        raise ExportError(f"tokenizer {spec!r} is a {tok.kind} tokenizer; export supports tokenizers in "
                          "`tokenizers` format (tokenizer.json, vocab.json + merges.txt): convert it first")
    bos = tok.id_to_token(bos_id) if bos_id is not None else None
    if bos is None:
        raise ExportError(f"tokenizer {spec!r} has no token of BOS id {bos_id}, the id that starts every training "
                          "document: pass --tokenizer with the tokenizer the model was trained with")
    backend = Tokenizer.from_str(tok.to_json())
    backend.post_processor = processors.TemplateProcessing(single=f"{bos} $A", pair=f"{bos} $A {bos} $B",
                                                           special_tokens=[(bos, bos_id)])
    specials = {t.content for t in backend.get_added_tokens_decoder().values() if t.special}
    pad_id = first_id([n for n in PAD_NAMES if n in specials], backend.token_to_id)
    pad_id = bos_id if pad_id is None else pad_id
    return ExportTokenizer(backend, TokenRoles(bos=bos, bos_id=bos_id, pad=backend.id_to_token(pad_id), pad_id=pad_id),
                           tok.name)
