import sys

from fertility.cli import main

sys.exit(main())
