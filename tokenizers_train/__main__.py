"""``python -m tokenizers_train`` and the ``tokenizers-train`` command ([project.scripts]): the signal handlers
first, then the command's heavy imports (common.signals.launch)."""

from common.signals import launch


def main() -> int:
    return launch("tokenizers-train", "tokenizers_train.cli")


if __name__ == "__main__":
    raise SystemExit(main())
