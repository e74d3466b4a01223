"""Stage: materialise the configured dataset in the local-collection format.

python -m rerank_scaling.stages.prepare_data --dataset '<json of config.dataset>' --out DIR
"""

from __future__ import annotations

import argparse
import logging

from rerank_scaling.datasets import materialise_dataset
from rerank_scaling.settings import parse_json_arg


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--dataset", required=True, help="JSON of the config's dataset section")
    parser.add_argument("--out", required=True, help="collection directory to write")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    materialise_dataset(parse_json_arg(args.dataset), args.out)


if __name__ == "__main__":
    main()
