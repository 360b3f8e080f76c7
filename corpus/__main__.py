"""``python -m corpus`` = the ``corpus`` command."""

from corpus.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
