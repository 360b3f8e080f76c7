"""Fixtures shared by every package's tests: the shipped sample, shipped tokenizers, and ../shared."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "data" / "sample"
SHIPPED_TOKENIZERS = ROOT / "data" / "tokenizers"
SHARED = ROOT.parent / "shared"


@pytest.fixture(scope="session")
def sample_dir() -> Path:
    """The sample corpus shipped in the repository (data/sample)."""
    return SAMPLE


@pytest.fixture(scope="session")
def shipped_tokenizers() -> Path:
    """Tokenizers shipped in the repository (gpt2, o200k_base)."""
    return SHIPPED_TOKENIZERS


@pytest.fixture(scope="session")
def shared_dir() -> Path:
    """../shared beside the checkout; tests that need it skip where it is absent (a user's fresh clone)."""
    if not (SHARED / "data").is_dir():
        pytest.skip(f"needs the team's shared data at {SHARED} (absent in a fresh clone of the repository)")
    return SHARED


@pytest.fixture(scope="session")
def shared_tokenizers(shared_dir: Path) -> Path:
    path = shared_dir / "tokenizers"
    if not path.is_dir():
        pytest.skip(f"needs reference tokenizers at {path}")
    return path


# --- the command-line contract (docs/contract.md), shared by every package's tests/*/test_contract.py -----------

class UserFiles:
    """Files of the user's beside a command's inputs and OUT: whatever the command does with bad input, they
    stay byte for byte as they were (:meth:`unchanged`)."""

    def __init__(self, *folders: Path) -> None:
        self.files = {}
        for i, folder in enumerate(folders):
            folder.mkdir(parents=True, exist_ok=True)
            path = folder / f"KEEP-{i}.txt"
            path.write_text(f"the user's own file {i}\n", encoding="utf-8")
            self.files[path] = path.read_bytes()

    def unchanged(self) -> bool:
        return all(p.is_file() and p.read_bytes() == content for p, content in self.files.items())


@pytest.fixture
def user_files():
    """``user_files(folder, ...)``: plant a file of the user's in each folder; ``.unchanged()`` checks them."""
    return UserFiles


def assert_input_error(code: int, stderr: str, *names: str, exit_code: int = 2) -> None:
    """The contract for bad input: exit 2, stderr exactly one line, no traceback, naming each of ``names``
    (the file, option or field at fault)."""
    lines = stderr.splitlines()
    assert code == exit_code, (code, stderr)
    assert "Traceback" not in stderr, stderr
    assert len(lines) == 1, stderr
    for name in names:
        assert name in lines[0], (name, lines[0])


@pytest.fixture
def input_error():
    """:func:`assert_input_error` as a fixture."""
    return assert_input_error


def assert_stopped_by_signal(code: int, stderr: str, signum: int) -> None:
    """The contract for a signal: exit 128 + its number, stderr one line naming it, no traceback."""
    import signal

    assert code == 128 + signum, (code, stderr)
    assert "Traceback" not in stderr and len(stderr.splitlines()) == 1, stderr
    assert signal.Signals(signum).name in stderr, stderr


@pytest.fixture
def stopped_by_signal():
    """:func:`assert_stopped_by_signal` as a fixture."""
    return assert_stopped_by_signal


def interrupt_command(proc, signum: int, *, ready=lambda: None, timeout: float = 120) -> tuple[str, str]:
    """Once ``ready()`` returns (it waits on a file the command writes, or on its answer: never on time), send
    ``signum`` to the running command ``proc``, wait for its end and assert the contract for a signal
    (:func:`assert_stopped_by_signal`); returns its (stdout, stderr). ``proc`` is killed whatever happens, a
    failing ``ready`` or a command outliving ``timeout`` included."""
    try:
        ready()
        proc.send_signal(signum)
        stdout, stderr = proc.communicate(timeout=timeout)
    finally:
        proc.kill()
    assert_stopped_by_signal(proc.returncode, stderr, signum)
    return stdout, stderr


@pytest.fixture
def interrupt():
    """:func:`interrupt_command` as a fixture."""
    return interrupt_command


# The contract cases every command shares, by name, and what each finds at OUT before the command runs.
OUT_STATES = {"--out a folder of the user's, --overwrite": "theirs", "--out an earlier result, no --overwrite": "ours",
              "--out is an existing file": "file beside", "--out is the folder of the text, --overwrite": "marked inputs"}


def plant_out_state(case: str, out: Path, inputs: Path) -> None:
    """Lay out what contract case ``case`` finds at OUT (:data:`OUT_STATES`): ``"theirs"`` (an empty folder
    of the user's, filled by ``user_files``), ``"ours"`` (an earlier result of this project, with a
    ``result.json``), ``"file beside"`` (a file of the user's beside OUT), ``"marked inputs"`` (the inputs
    lie in a folder that carries the project's marker); other cases find nothing there."""
    from common.outdir import MARKER

    state = OUT_STATES.get(case)
    out.parent.mkdir(parents=True, exist_ok=True)
    if state in ("theirs", "ours"):
        out.mkdir()
    if state == "ours":
        (out / MARKER).write_text('{"written_by": "bangla-tokfair"}')
        (out / "result.json").write_text('{"previous": true}')
    if state == "file beside":
        (out.parent / "notes.txt").write_text("the user's notes")
    if state == "marked inputs":
        (inputs / MARKER).write_text("{}")  # the inputs lie in an earlier output folder: still never replaced


def list_tree(root: Path) -> list[Path]:
    """Every path below ``root``, relative to it: compared before and after, nothing added or removed."""
    return sorted(p.relative_to(root) for p in root.rglob("*"))


@pytest.fixture
def plant_out():
    """:func:`plant_out_state` as a fixture."""
    return plant_out_state


@pytest.fixture
def tree():
    """:func:`list_tree` as a fixture."""
    return list_tree


@pytest.fixture
def input_folder(tmp_path):
    """``input_folder({name: text or bytes, ...})``: the user's input folder ``tmp_path/data`` holding those files
    (a name may hold folders)."""
    def write(files: dict[str, str | bytes]) -> Path:
        data = tmp_path / "data"
        for name, content in files.items():
            (data / name).parent.mkdir(parents=True, exist_ok=True)
            if isinstance(content, bytes):
                (data / name).write_bytes(content)
            else:
                (data / name).write_text(content, encoding="utf-8")
        return data

    return write


class BadInputCase:
    """One bad-input case of a command's contract test, laid out: OUT as the case finds it
    (:func:`plant_out_state`), a file of the user's beside the inputs, beside OUT and inside it (plus in
    ``more_folders``), the working folder OUT's parent (so ``.`` and ``..`` are the user's folders).
    ``cases(inputs, out)[case]`` gives the case's arguments and the names its message must hold; ``defaults``
    (option -> its arguments) come first where the case does not give the option, ``--out OUT`` last.
    :meth:`check` asserts the contract once the command ran."""

    def __init__(self, case: str, cases, inputs: Path, out: Path, defaults: dict[str, list[str]], *,
                 root: Path, monkeypatch, more_folders: tuple[Path, ...] = ()) -> None:
        plant_out_state(case, out, inputs)
        args, self.names = cases(inputs, out)[case]
        for option, given in defaults.items():
            if option not in args:
                args = [*given, *args]
        self.args = args if "--out" in args else [*args, "--out", str(out)]
        self.files = UserFiles(inputs, out.parent, *([out] if out.is_dir() else []), *more_folders)
        self.root, self.before = root, list_tree(root)
        monkeypatch.chdir(out.parent)

    def check(self, code: int, stderr: str) -> None:
        """Exit 2 and one line naming the case's names; the user's files as they were; nothing added or removed."""
        assert_input_error(code, stderr, *self.names)
        assert self.files.unchanged()
        assert list_tree(self.root) == self.before


@pytest.fixture
def bad_input_case(tmp_path, monkeypatch):
    """``bad_input_case(case, cases, inputs, out, defaults, more_folders=())``: a :class:`BadInputCase` below
    ``tmp_path``."""
    def lay_out(case: str, cases, inputs: Path, out: Path, defaults: dict[str, list[str]],
                more_folders: tuple[Path, ...] = ()) -> BadInputCase:
        return BadInputCase(case, cases, inputs, out, defaults, root=tmp_path, monkeypatch=monkeypatch,
                            more_folders=more_folders)

    return lay_out


@pytest.fixture(scope="session")
def sample_head():
    """``sample_head("bn/x.txt.gz", n)``: the first ``n`` lines of a shipped sample file, as text."""
    import gzip

    def head(name: str, lines: int) -> str:
        return "\n".join(gzip.decompress((SAMPLE / name).read_bytes()).decode().splitlines()[:lines]) + "\n"

    return head


@pytest.fixture
def mount_point(tmp_path):
    """``mount_point(name, read_only=False, bind=False)``: an empty tmpfs (or a bind mount of an empty folder
    of the same file system, which ``os.path.ismount`` does not see) mounted at ``tmp_path/name``; unmounted
    after the test. Skipped, with the reason, where mounting is not permitted (CI runs as root)."""
    import subprocess

    mounted: list[Path] = []

    def make(name: str, *, read_only: bool = False, bind: bool = False) -> Path:
        if os.geteuid() != 0:
            pytest.skip("mounting needs root (CI runs as root)")
        path = tmp_path / name
        path.mkdir(parents=True)
        if bind:
            (tmp_path / f"{name}.source").mkdir()
            argv = ["mount", "--bind", str(tmp_path / f"{name}.source"), str(path)]
        else:
            argv = ["mount", "-t", "tmpfs", "-o", "size=16m" + (",ro" if read_only else ""), "tmpfs", str(path)]
        proc = subprocess.run(argv, capture_output=True, text=True)
        if proc.returncode != 0:
            pytest.skip(f"{' '.join(argv[:3])} is not permitted here: {proc.stderr.strip()}")
        mounted.append(path)
        return path

    yield make
    for path in reversed(mounted):
        subprocess.run(["umount", str(path)], check=True)


@pytest.fixture
def busy_rename(monkeypatch):
    """``busy_rename(path)``: the next rename onto ``path`` fails with EBUSY, as a rename onto a mount point
    does where no check saw one (fault injection from the test, never in the code it tests); the ones after it
    (putting back what was moved aside) go through."""
    import errno

    from common import outdir

    real, real_exchange = Path.rename, outdir.exchange

    def make(path: Path) -> None:
        failed = []

        def rename(self, target):
            if not failed and Path(target).absolute() == Path(path).absolute():
                failed.append(target)
                raise OSError(errno.EBUSY, os.strerror(errno.EBUSY), str(self), None, str(target))
            return real(self, target)

        def exchange(a, b):  # the publish's one-step swap is a rename onto OUT too
            if not failed and Path(b).absolute() == Path(path).absolute():
                failed.append(b)
                raise OSError(errno.EBUSY, os.strerror(errno.EBUSY), str(b))
            return real_exchange(a, b)

        monkeypatch.setattr(Path, "rename", rename)
        monkeypatch.setattr(outdir, "exchange", exchange)

    return make


# --- a real Slurm on this machine (scripts/slurm-local.sh), for the tests of the Slurm executor and launch -------

class SlurmCluster:
    """A Slurm cluster of two nodes (n1, n2) on this host, partition ``partition``; ``env`` points the Slurm
    commands at it (``SLURM_CONF``)."""

    partition = "local"

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.conf = folder / "slurm.conf"
        self.env = {"SLURM_CONF": str(self.conf)}

    def squeue(self, *args: str) -> str:
        import subprocess

        return subprocess.run(["squeue", "-h", *args], env=os.environ | self.env, capture_output=True, text=True,
                              check=True).stdout

    def wait_job(self, job_id: str, timeout: float) -> str:
        """The state a job ends in (COMPLETED, FAILED, ...), polled from Slurm's record of it; ``sbatch --wait``
        would answer up to 32 s late. A job still queued or running after ``timeout`` fails the test."""
        import time

        deadline = time.monotonic() + timeout
        while True:
            state = self.squeue("-j", job_id, "-t", "all", "-o", "%T").strip()
            if state not in ("", "PENDING", "CONFIGURING", "RUNNING", "COMPLETING"):
                return state
            assert time.monotonic() < deadline, f"Slurm job {job_id} is still {state or 'unknown'} after {timeout} s"
            time.sleep(0.2)


@pytest.fixture(scope="session")
def slurm_cluster(tmp_path_factory):
    """``scripts/slurm-local.sh up`` once for the session (installing Slurm with apt-get where it is missing, as
    root on Debian), ``down`` at its end. Skipped with the script's reason where Slurm cannot run here."""
    import subprocess

    script = ROOT / "scripts" / "slurm-local.sh"
    folder = tmp_path_factory.mktemp("slurm") / "cluster"
    up = subprocess.run(["bash", str(script), "up", str(folder)], capture_output=True, text=True, timeout=1200)
    if up.returncode == 3:
        pytest.skip(up.stderr.strip())
    assert up.returncode == 0, up.stdout + up.stderr
    try:
        yield SlurmCluster(folder)
    finally:
        subprocess.run(["bash", str(script), "down", str(folder)], capture_output=True, timeout=300)
