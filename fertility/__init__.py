"""fertility: how a tokenizer treats each script and language (chars/token, ceilings, premiums, traps).

    import fertility
    report = fertility.analyze(["gpt2", "o200k_base"], {"bn": bangla_docs, "en": english_docs})
    report.tokenizer("gpt2").scripts["Bengali"].chars_per_token
    fertility.write_report(report, "out/fertility")
    fertility.show(pasted_text, tokenizers=["gpt2", "o200k_base"])  # in Jupyter: the tokens and figures inline
"""

import importlib

# Loaded when first used (PEP 562): the command's entry (``fertility.__main__``) installs its signal handlers
# before numpy and the tokenizers are imported, which importing this package must therefore not do.
_EXPORTS = {
    "InputError": "common.errors", "Report": "fertility.analysis", "TokenizerReport": "fertility.analysis",
    "analyze": "fertility.analysis", "Exploration": "fertility.present.explorer", "show": "fertility.present.explorer",
    "write_report": "fertility.present.report", "Metrics": "fertility.scoring.metrics",
    "TokenSegment": "fertility.segments", "token_segments": "fertility.segments", "Document": "fertility.text",
    "TextError": "fertility.text", "TextSource": "fertility.text", "iter_documents": "fertility.text",
    "parse_text_arg": "fertility.text", "Tokenizer": "fertility.tokenizers",
    "TokenizerLoadError": "fertility.tokenizers", "load_tokenizer": "fertility.tokenizers",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    if name not in _EXPORTS:
        raise AttributeError(f"module 'fertility' has no attribute {name!r}")
    value = getattr(importlib.import_module(_EXPORTS[name]), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
