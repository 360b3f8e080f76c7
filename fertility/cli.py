"""``fertility report``: measure tokenizers on labelled text and write a report.

    fertility report --tokenizer gpt2 --tokenizer o200k_base \\
        --text bn=data/sample/bn/literature-bnarchive.txt.gz --text en=data/sample/en/wiki-en-chinapedia.txt.gz \\
        --parallel bn=ben.txt.gz --parallel en=eng.txt.gz --reference en --max-chars 400000 --out out/fertility
"""

from __future__ import annotations

import argparse

from common import cli as clihelp
from common import paths
from common.errors import InputError
from common.outdir import output_dir
from fertility.analysis import analyze
from fertility.premium import FLORES_REFERENCE, add_parallel_arguments, parallel_sources
from fertility.present.report import terminal_table, write_report
from fertility.text import BadUTF8Error, input_paths, parse_text_arg
from fertility.tokenizers import KNOWN_TOKENIZERS, TOKENIZER_DIR_ENV, split_label

PROG = "fertility"
# One block in 64 in detail keeps a report within 1.25x of the encoder's own time (benchmarks/bench_fertility.py).
DEFAULT_DETAIL_EVERY = 64


def build_parser() -> argparse.ArgumentParser:
    parser = clihelp.parser(PROG, "How tokenizers treat each script and language.")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    rep = sub.add_parser("report", help="measure tokenizers on labelled text; write report.json/.md/.html",
                         description="Measure tokenizers on labelled text; write report.json, report.md and "
                                     "report.html.", formatter_class=clihelp.HelpFormatter)
    rep.add_argument("--tokenizer", action="append", required=True, metavar="SPEC", type=paths.name_or_path,
                     help=f"a known name ({', '.join(KNOWN_TOKENIZERS)}), a path, a Hugging Face Hub id (org/name"
                          "[@revision], from the Hub's cache; offline with HF_HUB_OFFLINE=1), or NAME=SPEC to name "
                          "any of these NAME in the report; repeat for several")
    rep.add_argument("--text", action="append", default=[], metavar="LANG=PATH", type=paths.input_spec(),
                     help="labelled text: LANG=PATH, LANG=PATH:FIELD or LANG=hf:NAME[:CONFIG[:SPLIT[:FIELD]]]")
    add_parallel_arguments(rep, parallel_help="line-aligned parallel text, one file per language (for the premium); "
                                              "without --text, the parallel files are also the text measured per language",
                           flores_help="a local FLORES-200 folder (DIR/devtest/LANG.devtest): every language as "
                                       "parallel text, premiums against eng_Latn unless --reference names another "
                                       "FLORES code")
    rep.add_argument("--reference", default=None, type=clihelp.label,
                     help="the parallel language premiums are measured against (default en; eng_Latn with --flores)")
    rep.add_argument("--max-chars", type=clihelp.positive_int, default=None,
                     help="read only the first N characters (whole documents) of each source")
    rep.add_argument("--tokenizer-dir", default=None, metavar="DIR", type=paths.input_folder,
                     help=f"where known names are found (else ${TOKENIZER_DIR_ENV}, then data/tokenizers)")
    rep.add_argument("--out", required=True, metavar="DIR", type=paths.output_dir,
                     help="the report folder: new or empty (published only on success; docs/contract.md)")
    rep.add_argument("--overwrite", action="store_true", help="replace an existing report folder this project wrote")
    rep.add_argument("--detail-every", type=clihelp.positive_int, default=DEFAULT_DETAIL_EVERY, metavar="K",
                     help="analyse one block of text in K in detail (scripts, clusters, words, ceilings: estimates "
                          "with 95%% intervals) and every document for its exact chars/bytes/tokens; 1: all in detail "
                          f"(default {DEFAULT_DETAIL_EVERY})")
    rep.add_argument("--skip-bad-utf8", action="store_true",
                     help="skip lines of --text files that are not UTF-8 (counted in report.json) instead of stopping")
    rep.add_argument("--no-progress", action="store_true", help="no progress bars")
    _add_serve_parser(sub)
    return parser


def _add_serve_parser(sub) -> None:
    from fertility.present.serve import DEFAULT_HOST, DEFAULT_PORT, WORKERS

    srv = sub.add_parser("serve", help="the explorer: a local web app showing how tokenizers cut pasted text",
                         description="The explorer as a local web app: paste text or drop a file, choose tokenizers, "
                                     "see the tokens and the report's figures. Prints its URL; opens nothing.",
                         formatter_class=clihelp.HelpFormatter)
    srv.add_argument("--tokenizer", action="append", default=[], metavar="SPEC", type=paths.name_or_path,
                     help="a tokenizer to offer (a known name, a path, a Hub id or NAME=SPEC, as for report; "
                          "loaded now); repeat for several. "
                          "The known names found in the tokenizer folders are offered too")
    srv.add_argument("--tokenizer-dir", default=None, metavar="DIR", type=paths.input_folder,
                     help=f"where known names are found (else ${TOKENIZER_DIR_ENV}, then data/tokenizers)")
    srv.add_argument("--host", default=DEFAULT_HOST, type=paths.text,
                     help="the address to listen on; anything but loopback lets other machines in (a warning says so)")
    srv.add_argument("--port", type=clihelp.port, default=DEFAULT_PORT, help="the port; 0 picks a free one")
    srv.add_argument("--workers", type=clihelp.positive_int, default=WORKERS,
                     help="requests measured at once (each on a thread; more wait their turn)")


def run_serve(args: argparse.Namespace) -> int:
    """``fertility serve``: the tokenizers and the address are checked before it listens; runs until a signal."""
    from fertility.present.serve import Shelf, serve

    serve(Shelf(args.tokenizer, args.tokenizer_dir), args.host, args.port, workers=args.workers)
    return 0


def run(args: argparse.Namespace) -> int:
    if args.command == "serve":
        return run_serve(args)
    # Every argument is checked before any work: the sources and the output folder here, the tokenizers and
    # the readability of every text in analyze (before its first batch).
    texts = [parse_text_arg(a) for a in args.text]
    parallel = parallel_sources(args.parallel, args.flores, args.flores_split)
    if not texts and not parallel:
        raise InputError("no text: pass --text LANG=PATH, --parallel LANG=PATH or --flores DIR")
    inputs = input_paths([*texts, *parallel.values(), *(split_label(t)[1] for t in args.tokenizer),
                          *filter(None, [args.flores, args.tokenizer_dir])])
    reference = args.reference or (FLORES_REFERENCE if args.flores else "en")
    with output_dir(args.out, "fertility report", overwrite=args.overwrite, inputs=inputs):
        try:
            report = analyze(args.tokenizer, texts or list(parallel.values()), parallel=parallel or None,
                             reference=reference, max_chars=args.max_chars, tokenizer_dir=args.tokenizer_dir,
                             progress=not args.no_progress, errors="skip" if args.skip_bad_utf8 else "strict",
                             detail_every=args.detail_every)
        except BadUTF8Error as e:  # only this command knows its flag for skipping such lines
            raise e.with_hint("pass --skip-bad-utf8 to skip such lines") from None
        print(terminal_table(report))
        out = write_report(report, args.out, overwrite=args.overwrite)
    print(f"report: {out / 'report.html'} (also report.md, report.json)")
    return 0


def main(argv: list[str] | None = None) -> int:
    return clihelp.run_command(PROG, build_parser, run, argv)
