"""Strict JSON for everything otprior writes (the command line's ``--json``, the report's tables).

JSON has no NaN or infinities: non-finite numbers are written as the strings ``"Infinity"``,
``"-Infinity"`` and ``"NaN"``, so that every output parses with a strict reader
(``json.loads(text, parse_constant=...)`` that refuses the bare constants).
"""

from __future__ import annotations

import math
import os

from ._validation import describe_value

__all__ = ["to_strict_json"]

_NONFINITE = {math.inf: "Infinity", -math.inf: "-Infinity"}
_MAX_INT_BITS = 13_000  # about 3900 decimal digits


def to_strict_json(value):
    """``value`` as plain JSON data: dicts, lists, strings, finite numbers, booleans, null.

    Non-finite floats become the strings ``"Infinity"``, ``"-Infinity"``, ``"NaN"``; an integer
    of more than about 3900 digits the string that describes its size;
    numpy scalars and arrays, mpmath numbers, paths and objects with ``as_dict`` are
    converted; anything else becomes its ``str``.
    """
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, int):
        # Python writes no integer of more than 4300 digits as text: a bigger one is described by its size
        return value if value.bit_length() <= _MAX_INT_BITS else describe_value(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "NaN"
        return _NONFINITE.get(value, value)
    if isinstance(value, dict):
        return {str(k): to_strict_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [to_strict_json(v) for v in value]
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    if hasattr(value, "as_dict"):
        return to_strict_json(value.as_dict())
    if hasattr(value, "tolist"):  # numpy scalars and arrays
        return to_strict_json(value.tolist())
    if type(value).__module__.startswith("mpmath"):
        try:
            return to_strict_json(float(value))
        except (TypeError, ValueError):
            return str(value)
    if hasattr(value, "__float__") and not isinstance(value, complex):
        try:
            return to_strict_json(float(value))
        except (TypeError, ValueError, OverflowError):
            return str(value)
    return str(value)
