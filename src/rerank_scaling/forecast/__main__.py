import sys

from rerank_scaling.forecast.cli import main

sys.exit(main(["forecast", *sys.argv[1:]]))
