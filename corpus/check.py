"""Stage 1 of a build, before any work: every check that needs no ingest (the sources parse and can be read, the
mixture names their languages, the plan's numbers are sane, every tokenizer loads and the build's has a BOS,
the executor can be used, a --work-dir is a folder) and what OUT holds (the --out policy of ``common.outdir``,
a rerun of a finished build, the shard set an --append adds to). The result, :class:`~corpus.config.Checked`,
is what the later stages use instead of checking again."""

from __future__ import annotations

from pathlib import Path

from common.errors import InputError, OutputPathError
from common.outdir import check_output_dir, is_ours
from common.owned import check_claimable
from corpus.config import BuildConfig, BuildError, Checked
from corpus.engine.executors import ExecutorConfig, check_executor
from corpus.engine.staging import WORK_ROLE
from corpus.mixture.plan import check_mixture
from corpus.read.sources import check_sources, parse_source
from corpus.shards.format import MANIFEST_NAME, Manifest, TokenizerInfo, dtype_for_vocab
from fertility.text import TextSource, input_paths
from fertility.tokenizers import Tokenizer, check_distinct_names, load_tokenizer


def check_build(config: BuildConfig, out_dir: Path, executor: ExecutorConfig, work_dir: str | None, *,
                append: bool, overwrite: bool) -> Checked:
    """Stage 1 of ``corpus build``: :func:`check_inputs`, the --work-dir, and what OUT holds (``existing``, and
    ``done`` when it is this very build)."""
    checked = check_inputs(config, executor)
    check_work_dir(work_dir, out_dir)
    checked.existing, checked.done = check_out(out_dir, checked.info, config.arguments(), append=append,
                                               overwrite=overwrite, inputs=input_paths(checked.sources))
    return checked


def check_plan(config: BuildConfig, out_dir: str | Path | None, executor: ExecutorConfig,
               work_dir: str | None) -> Checked:
    """Stage 1 of ``corpus plan``: :func:`check_inputs`, the --work-dir, and the later build's --out, held to the
    same policy now, so that it is refused before the ingest."""
    checked = check_inputs(config, executor)
    check_work_dir(work_dir, out_dir)
    if out_dir is not None:
        check_output_dir(out_dir, overwrite=True, inputs=input_paths(checked.sources))
    return checked


def check_inputs(config: BuildConfig, executor: ExecutorConfig) -> Checked:
    """Every check that needs no ingest, before any work: the sources parse (labels included) and can be read,
    the mixture names exactly their languages, the plan's numbers are sane, every tokenizer loads and the
    build's has a BOS, and the executor can be used."""
    sources = parse_sources(config.sources)
    check_mixture(config.tokens, mix=config.mix, temperature=config.temperature, max_epochs=config.max_epochs,
                  languages={s.lang for s in sources})
    tok = load_tokenizer(config.ingest.tokenizer, config.ingest.tokenizer_dir)
    info = tokenizer_info(tok, config.ingest.tokenizer)
    # loaded again by every ingest task; fail here, not there. Their names head the report's token columns.
    compare = [load_tokenizer(spec, config.ingest.tokenizer_dir).name for spec in config.ingest.compare_tokenizers]
    check_distinct_names([tok.name, *compare])
    check_sources(sources, config.ingest.min_language_score)
    check_executor(executor)
    return Checked(sources, tok, info, compare)


def parse_sources(args: list[str]) -> list[TextSource]:
    """``["bn=PATH", ...]`` -> sources, in order; at least one."""
    if not args:
        raise BuildError("give at least one --source LANG=SPEC")
    return [parse_source(a) for a in args]


def tokenizer_info(tok: Tokenizer, spec: str) -> TokenizerInfo:
    """The manifest's tokenizer record; its spec is what loads the same tokenizer, under the same name, from any
    folder (``Tokenizer.spec``: the file's absolute path, a Hub id, NAME=...)."""
    if tok.bos_id is None:
        raise BuildError(f"tokenizer {spec!r} has no BOS (or end-of-text) token; every document in a shard "
                         f"must start with one. Train or choose a tokenizer that defines it")
    return TokenizerInfo(spec=tok.spec or spec, sha256=tok.fingerprint,
                         vocab_size=tok.vocab_size, bos_id=tok.bos_id, eos_id=tok.eos_id)


def check_work_dir(work_dir: str | None, out_dir: str | Path | None = None) -> None:
    """A --work-dir (a local folder or a URL) must be new, empty or a work folder of ours (``common.owned``): the
    build records there each name it writes and removes only those when done, so a folder of the user's (the
    inputs', the tokenizer's, the current one) is refused rather than written into. Not OUT or inside it either:
    OUT is replaced by the result."""
    if work_dir is None:
        return
    if "://" not in str(work_dir):
        path = Path(work_dir)
        parent = next((p for p in (path, *path.parents) if p.exists()), None)
        if parent is not None and not parent.is_dir():
            raise InputError(f"--work-dir {work_dir}: {parent} is not a folder; give a folder (or a URL) for the "
                             "stages' files")
        if out_dir is not None and (path.resolve() == Path(out_dir).resolve()
                                    or Path(out_dir).resolve() in path.resolve().parents):
            raise InputError(f"--work-dir {work_dir}: is --out or lies inside it; give a folder apart from --out")
    check_claimable(work_dir, WORK_ROLE, "--work-dir")


def _current(arguments: dict) -> dict:
    return {k: v for k, v in arguments.items() if k != "previous"}


def check_out(out_dir: Path, info: TokenizerInfo, args: dict, *, append: bool, overwrite: bool,
               inputs: list[str]) -> tuple[Manifest | None, bool]:
    """Before any work, what OUT holds: ``(manifest, True)`` when it is this very build already (a rerun does
    nothing: same arguments and the same tokenizer file), ``(manifest, False)`` for the shard set that
    ``append`` adds to, else ``(None, False)``. Refuses an OUT the --out policy forbids (``common.outdir``), a
    result of other arguments or another tokenizer without ``--overwrite``, and an ``--append`` to anything but
    a shard set of the same tokenizer."""
    check_output_dir(out_dir, overwrite=True, inputs=inputs)  # the rules no flag lifts
    existing = None
    if is_ours(out_dir) and (out_dir / MANIFEST_NAME).is_file():
        existing = Manifest.load(out_dir)
        # The same arguments are this very build only with the same tokenizer: a tokenizer retrained at the
        # same path (the demo's second run) would otherwise keep shards of the old one's ids.
        if _current(existing.arguments) == args and existing.tokenizer.sha256 == info.sha256:
            return existing, True
    if append:
        if existing is None:
            raise BuildError(f"--append: {out_dir} is not a shard set written by `corpus build`; build one there "
                             "first, or drop --append")
        if existing.tokenizer.sha256 != info.sha256:
            raise BuildError(
                f"{out_dir / MANIFEST_NAME}: its shards were made with tokenizer {existing.tokenizer.spec} "
                f"(sha256 {existing.tokenizer.sha256[:12]}), not {info.spec} (sha256 {info.sha256[:12]}); token "
                "ids of two tokenizers cannot share a shard set. Use another --out, or the manifest's tokenizer")
        if existing.dtype != dtype_for_vocab(info.vocab_size):
            raise BuildError(f"{out_dir}: existing shards are {existing.dtype}, this tokenizer needs "
                             f"{dtype_for_vocab(info.vocab_size)}")
        return existing, False
    if existing is not None and not overwrite:
        raise OutputPathError(f"--out {out_dir}: already holds a shard set built with other arguments or another "
                              "tokenizer; pass --append to add these shards to it, --overwrite to replace it, or choose another --out")
    check_output_dir(out_dir, overwrite=overwrite, inputs=inputs)
    return None, False
