import sys

from generators.run import main

sys.exit(main())
