"""Reading an ir_datasets part that may need a download, on a machine that may be offline.

ir_datasets downloads into ``$IR_DATASETS_HOME`` (default ``~/.ir_datasets``) on first read; offline,
a missing file makes it fail with a connection error (or its own 'All download sources failed').
:func:`guarded_download` re-raises that as :class:`DatasetUnavailable`, whose message names the
file to place where. Used by the data stage (:mod:`.data.datasets`) and by the prefetch
(:mod:`.hub`), so it lives below both.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any


class DatasetUnavailable(RuntimeError):
    """An ir_datasets file could not be fetched (offline); the message says what to place where."""


def _offline_hint(dataset_id: str, err: BaseException) -> DatasetUnavailable:
    home = os.environ.get("IR_DATASETS_HOME", str(Path.home() / ".ir_datasets"))
    return DatasetUnavailable(
        f"ir_datasets could not load {dataset_id!r}: {type(err).__name__}: {err}\n"
        f"This machine cannot download it. Fetch the file named in the URL above on a connected machine "
        f"and place it under {home}/<dataset name>/ (e.g. {home}/cranfield/cran.tar.gz), where "
        f"ir_datasets looks before downloading; or use dataset.source: local with a prepared directory."
    )


def guarded_download(dataset_id: str, iterator_factory: Any) -> Iterator[Any]:
    """The items of ``iterator_factory()`` (an ir_datasets ``*_iter``); a failed download raises
    :class:`DatasetUnavailable` with the hint."""
    try:
        yield from iterator_factory()
    except (ConnectionError, OSError) as err:  # urllib/requests errors derive from these
        raise _offline_hint(dataset_id, err) from err
    except RuntimeError as err:  # ir_datasets: ('All download sources failed', [...])
        if "download" not in str(err).lower():
            raise
        raise _offline_hint(dataset_id, err) from err
