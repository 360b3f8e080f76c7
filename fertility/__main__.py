"""``python -m fertility`` and the ``fertility`` command ([project.scripts]): the signal handlers first, then the
command's heavy imports (common.signals.launch)."""

from common.signals import launch


def main() -> int:
    return launch("fertility", "fertility.cli")


if __name__ == "__main__":
    raise SystemExit(main())
