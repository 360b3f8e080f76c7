import sys

from tokenizers_train.cli import main

sys.exit(main())
