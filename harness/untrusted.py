"""JSON from files a user hands the harness (reproducers, cases files, results, bisect states), parsed
with a size and a depth limit: Python's parser recurses, so a deeply nested file would otherwise end
in a RecursionError, a traceback instead of a one-line error."""
from __future__ import annotations

import json
import re

MAX_CHARS = 64 << 20   # one JSON document (a file, or a line of a JSON-lines file)
MAX_DEPTH = 64         # the harness's own files nest 5 deep at most

_STRING = re.compile(r'"(?:[^"\\]|\\.)*"')  # brackets inside strings do not nest
_BRACKET = re.compile(r"[\[\]{}]")


def loads(text: str):
    """json.loads(text), or ValueError (as json.JSONDecodeError is) when it is too large or too deep."""
    if len(text) > MAX_CHARS:
        raise ValueError(f"larger than {MAX_CHARS} characters")
    depth = 0
    for m in _BRACKET.finditer(_STRING.sub('""', text)):
        depth += 1 if m.group() in "[{" else -1
        if depth > MAX_DEPTH:
            raise ValueError(f"nested deeper than {MAX_DEPTH} levels")
    return json.loads(text)
