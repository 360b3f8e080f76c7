"""How every command of the project shows its help: defaults shown, descriptions kept as written, and the
reST markup of docstrings (````code````, ``:func:`x```) turned into plain text for a terminal."""

from __future__ import annotations

import argparse
import re

_ROLE = re.compile(r":(?:func|class|meth|mod|data|attr|obj):`~?([^`]+)`")
_LITERAL = re.compile(r"``([^`]+)``")
_REF = re.compile(r"`([^`]+)`")


def plain(text: str) -> str:
    """Docstring text without reST markup: ``:func:`a.b``` -> a.b, ````x```` -> x, ```a.b``` -> a.b."""
    return _REF.sub(r"\1", _LITERAL.sub(r"\1", _ROLE.sub(r"\1", text)))


class HelpFormatter(argparse.RawDescriptionHelpFormatter, argparse.ArgumentDefaultsHelpFormatter):
    """Descriptions as written (paragraphs and examples kept), every option's default shown."""

    def _get_help_string(self, action: argparse.Action) -> str:
        # No "(default: None)" / "(default: False)" noise for options without a meaningful default.
        if action.default in (None, False, [], "", argparse.SUPPRESS) or "%(default)" in (action.help or ""):
            return action.help or ""
        return super()._get_help_string(action)


def parser(prog: str, doc: str | None = None, **kwargs) -> argparse.ArgumentParser:
    """An ``ArgumentParser`` with the project's help format; ``doc`` (a docstring) becomes its plain description."""
    return argparse.ArgumentParser(prog=prog, description=plain(doc) if doc else None,
                                   formatter_class=HelpFormatter, **kwargs)
