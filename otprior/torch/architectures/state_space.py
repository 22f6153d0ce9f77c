"""State-space and hybrid families: refused, with why and what can still be said."""

from __future__ import annotations

from . import Architecture, register

NO_ATTENTION = (
    "{family} has no attention layers (a state-space / recurrent model): there are no attention rows, so no window mass "
    "to predict; position enters through the recurrence, which otprior does not analyse"
)
HYBRID = (
    "{family} mixes attention with state-space layers; its attention layers carry no positional encoding (NoPE: at "
    "constant content a uniform row, m_n(W) = W/n, diluting by Theorem 11), but position reaches them through the "
    "state-space layers' outputs, i.e. through the content, which otprior does not bound; refused rather than called "
    "diluting. What holds: for content within B, Theorem 10's band around W/n"
)

for _family in ("mamba", "mamba2", "falcon_mamba", "rwkv"):
    register(Architecture(_family, (_family,), refusal=NO_ATTENTION))
for _family in ("jamba", "zamba", "zamba2", "bamba", "falcon_h1", "granitemoehybrid", "nemotron_h"):
    register(Architecture(_family, (_family,), refusal=HYBRID))
