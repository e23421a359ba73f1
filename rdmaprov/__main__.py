import sys

from rdmaprov.cli import main

sys.exit(main())
