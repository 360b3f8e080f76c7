"""``python -m pretrain`` and the ``pretrain`` command ([project.scripts]): the signal handlers first, then the
command's heavy imports (common.signals.launch)."""

from common.signals import launch


def main() -> int:
    return launch("pretrain", "pretrain.cli")


if __name__ == "__main__":
    raise SystemExit(main())
