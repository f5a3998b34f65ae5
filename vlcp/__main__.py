import sys

from vlcp.cli import main

sys.exit(main())
