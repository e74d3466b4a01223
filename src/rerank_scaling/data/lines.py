"""Numbered text lines of a data file, decoded as UTF-8 one line at a time.

Reading a file with ``open(..., encoding="utf-8")`` fails on a bad byte with a ``UnicodeDecodeError``
that names neither the file nor the line, and keeps a UTF-8 byte-order mark as part of the first
field (a queries file saved by a spreadsheet then has a first qid ``'\\ufeffq1'`` that no qrels line
names). Every reader of the collection's files reads through :func:`numbered_lines`, which names
``file:line`` for both.
"""

from __future__ import annotations

import codecs
import os
from collections.abc import Iterator


def numbered_lines(path: str | os.PathLike[str]) -> Iterator[tuple[int, str]]:
    """Yield (line number, line without its newline) of a UTF-8 text file; a byte-order mark or a
    line that is not UTF-8 raises ``ValueError`` naming ``path:line`` and the fix."""
    with open(path, "rb") as handle:
        for line_no, raw in enumerate(handle, 1):
            if line_no == 1 and raw.startswith(codecs.BOM_UTF8):
                raise ValueError(
                    f"{path}:1: the file starts with a UTF-8 byte-order mark; save it as UTF-8 without "
                    "BOM (e.g. `sed -i '1s/^\\xEF\\xBB\\xBF//' FILE`)"
                )
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError as err:
                raise ValueError(
                    f"{path}:{line_no}: not UTF-8 (byte {raw[err.start]:#04x} at column {err.start + 1}); "
                    "convert the file to UTF-8 (e.g. `iconv -f latin1 -t utf-8`)"
                ) from None
            yield line_no, text.rstrip("\r\n")
