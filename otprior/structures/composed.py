"""Structures together: the visible counts by their minimum, the extra weights added, one cap."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .._validation import DomainError
from ._base import Structure

__all__ = ["Composed", "compose"]


@dataclass(frozen=True, repr=False)
class Composed(Structure):
    """Several elementary structures on one row (e.g. gpt-oss: a sliding window and a sink)."""

    name = "composed"

    structures: tuple = ()

    def __post_init__(self):
        flat = []
        for s in self.structures:
            if not isinstance(s, Structure):
                raise DomainError("structure", s, "an otprior.structures instance")
            flat.extend(s.parts())
        caps = [s for s in flat if s.logit_cap is not None]
        if len(caps) > 1:
            raise DomainError("structure", tuple(flat), "at most one soft cap")
        heads = {s.heads for s in flat if s.heads is not None}
        if len(heads) > 1:
            raise DomainError("structure", tuple(flat), "per-head parts with one head count")
        object.__setattr__(self, "structures", tuple(flat))

    def parts(self):
        return self.structures

    def visible(self, n):
        return min([n] + [s.visible(n) for s in self.structures])

    @property
    def logit_cap(self):
        caps = [s.logit_cap for s in self.structures if s.logit_cap is not None]
        return caps[0] if caps else None

    @property
    def sink_logit(self):
        sinks = [s.sink_logit for s in self.structures if s.sink_logit is not None]
        if not sinks:
            return None
        if any(isinstance(s, tuple) for s in sinks):
            H = next(len(s) for s in sinks if isinstance(s, tuple))
            arr = np.logaddexp.reduce([np.broadcast_to(np.asarray(s, dtype=float), (H,)) for s in sinks], axis=0)
            return tuple(float(x) for x in arr)
        return float(np.logaddexp.reduce(np.asarray(sinks, dtype=float)))

    def extra_log_weight(self, n):
        logs = [x for x in (s.extra_log_weight(n) for s in self.structures) if x is not None]
        return None if not logs else float(np.logaddexp.reduce(np.asarray(logs, dtype=float)))

    def for_head(self, h):
        return Composed(tuple(s.for_head(h) for s in self.structures))

    def __repr__(self):
        return " + ".join(map(repr, self.structures)) or "FullCausal()"


def compose(*structures) -> Structure:
    """One structure from several (``compose()`` is full causal; one argument is returned as it is)."""
    from .masks import FullCausal

    parts = [p for s in structures for p in (s.parts() if isinstance(s, Structure) else (s,)) if not isinstance(p, FullCausal)]
    if not parts:
        return FullCausal()
    if len(parts) == 1:
        if not isinstance(parts[0], Structure):
            raise DomainError("structure", parts[0], "an otprior.structures instance")
        return parts[0]
    return Composed(tuple(parts))
