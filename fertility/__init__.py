"""fertility: how a tokenizer treats each script and language (chars/token, ceilings, premiums, traps).

    import fertility
    report = fertility.analyze(["gpt2", "o200k_base"], {"bn": bangla_docs, "en": english_docs})
    report.tokenizer("gpt2").scripts["Bengali"].chars_per_token
    fertility.write_report(report, "out/fertility")
    fertility.show(pasted_text, tokenizers=["gpt2", "o200k_base"])  # in Jupyter: the tokens and figures inline
"""

from common.errors import InputError
from fertility.analysis import Report, TokenizerReport, analyze
from fertility.present.explorer import Exploration, show
from fertility.present.report import write_report
from fertility.scoring.metrics import Metrics
from fertility.segments import TokenSegment, token_segments
from fertility.text import Document, TextError, TextSource, iter_documents, parse_text_arg
from fertility.tokenizers import Tokenizer, TokenizerLoadError, load_tokenizer

__all__ = [
    "Document", "Exploration", "InputError", "Metrics", "Report", "TextError", "TextSource", "Tokenizer", "TokenizerLoadError",
    "TokenSegment", "TokenizerReport", "analyze", "iter_documents", "load_tokenizer", "parse_text_arg",
    "show", "token_segments", "write_report",
]
