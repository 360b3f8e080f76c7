"""One interface over every tokenizer format: HF ``tokenizer.json``, GPT-2 style ``vocab.json`` + ``merges.txt``,
sentencepiece ``.model``, tiktoken ranks files and WordPiece ``vocab.txt``.

``load_tokenizer`` takes a known name (resolved in a tokenizer directory), a path, a Hugging Face Hub id (through
its cache), ``NAME=SPEC`` (any of these, named NAME), or a :class:`Tokenizer`.
Every adapter encodes batches without adding special tokens and treats special-token strings in the text as
plain text, so token counts are those of the text alone. Token spans are UTF-8 byte offsets (see ``base``).

Modules: ``base`` (the interface, shared array helpers), ``tiktoken``, ``hf``, ``sentencepiece`` (one per
library; each defines its file formats), ``loading`` (names, paths, ``FORMATS``: the one list of formats).
"""

from fertility.tokenizers.base import (
    Encoded,
    Format,
    Spans,
    Tokenizer,
    TokenizerLoadError,
    one_thread,
    worker_pool,
)
from fertility.tokenizers.hf import GPT2_PATTERN, QWEN_PATTERN, HFTokenizer
from fertility.tokenizers.loading import (
    FORMATS,
    KNOWN_TOKENIZERS,
    SHIPPED_TOKENIZER_DIR,
    TOKENIZER_DIR_ENV,
    available_known,
    check_distinct_names,
    check_tokenizer_dir,
    load_tokenizer,
    split_label,
)
from fertility.tokenizers.sentencepiece import SentencePieceTokenizer
from fertility.tokenizers.tiktoken import (
    CL100K_PATTERN,
    LLAMA3_PATTERN,
    O200K_PATTERN,
    R50K_PATTERN,
    TiktokenTokenizer,
    read_tiktoken_ranks,
)

__all__ = [
    "CL100K_PATTERN", "FORMATS", "GPT2_PATTERN", "KNOWN_TOKENIZERS", "LLAMA3_PATTERN", "O200K_PATTERN",
    "QWEN_PATTERN", "R50K_PATTERN", "SHIPPED_TOKENIZER_DIR", "TOKENIZER_DIR_ENV", "Encoded", "Format", "HFTokenizer",
    "SentencePieceTokenizer", "Spans", "TiktokenTokenizer", "Tokenizer", "TokenizerLoadError", "available_known",
    "check_distinct_names", "check_tokenizer_dir", "load_tokenizer", "one_thread", "read_tiktoken_ranks",
    "split_label", "worker_pool",
]
