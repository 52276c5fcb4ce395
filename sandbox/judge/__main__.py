import sys

from sandbox.judge.main import main

sys.exit(main(sys.argv))
