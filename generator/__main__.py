"""``python -m tilegen.generator [--spec DIR] [--out DIR]``: regenerate generated/ from spec/."""

import sys

from tilegen.generator.generate import main

sys.exit(main())
