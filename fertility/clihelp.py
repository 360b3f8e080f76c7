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
        # No "(default: None)" / "(default: False)" noise for options without a meaningful default, and no
        # second default where the help already names one.
        text = action.help or ""
        if action.default in (None, False, [], "", argparse.SUPPRESS) or "default" in text.lower():
            return text
        return super()._get_help_string(action)

    def _get_default_metavar_for_optional(self, action: argparse.Action) -> str:
        # One convention in every command: N for a count, X for a number, else the option's name.
        return {int: "N", float: "X"}.get(action.type, action.dest.upper())


def parser(prog: str, doc: str | None = None, **kwargs) -> argparse.ArgumentParser:
    """An ``ArgumentParser`` with the project's help format; ``doc`` (a docstring) becomes its plain description."""
    return argparse.ArgumentParser(prog=prog, description=plain(doc) if doc else None,
                                   formatter_class=HelpFormatter, **kwargs)
