"""T5's learned relative buckets: T5, mT5, umT5, LongT5 (decoder), Switch, Pop2Piano, UDOP."""

from __future__ import annotations

from . import Architecture, register


def _t5(cfg, family, implementation, rope):
    return "t5", {}, f"{family} relative_attention_bias"


register(Architecture("t5", ("t5", "mt5", "longt5", "umt5", "switch_transformers", "pop2piano", "udop"), _t5, early=True))
