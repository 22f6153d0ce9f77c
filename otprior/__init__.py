"""otprior: positional priors of causal attention, computable and checkable.

The prefix-consistent causal unbalanced OT operator, its exact and scale-invariant
priors and dilution laws; log-distance priors with certified window-mass bounds;
margin selection; the bounded/diluting classification of positional encodings.
``proofs/`` states and proves each result.
"""

from . import encodings, normalisers, structures
from ._balls import Enclosure
from ._validation import ConvergenceError, DomainError, PrecisionError
from .causal_ot import causal_ot_attention, causal_ot_fixed_point
from .classification import Verdicts, classify
from .content_bound import ContentBand, content_band
from .log_distance import distant_mass, distant_mass_bounds, window_mass, window_mass_bounds
from .margin import MarginResult, NoMarginError, margin_for
from .ot_prior import (
    DilutionBound,
    OTPrior,
    ot_dilution_bound,
    ot_prior,
    ot_window_law,
    ot_window_mass,
    ot_window_mass_bound,
)
from .scale_invariant import scale_invariant_cdf, scale_invariant_density, scale_invariant_normaliser

__version__ = "0.2.0"

__all__ = [
    "causal_ot_attention",
    "causal_ot_fixed_point",
    "ot_prior",
    "ot_window_mass",
    "ot_window_law",
    "ot_dilution_bound",
    "ot_window_mass_bound",
    "OTPrior",
    "DilutionBound",
    "content_band",
    "ContentBand",
    "Enclosure",
    "normalisers",
    "scale_invariant_cdf",
    "scale_invariant_density",
    "scale_invariant_normaliser",
    "window_mass",
    "distant_mass",
    "window_mass_bounds",
    "distant_mass_bounds",
    "margin_for",
    "MarginResult",
    "classify",
    "Verdicts",
    "encodings",
    "structures",
    "NoMarginError",
    "DomainError",
    "ConvergenceError",
    "PrecisionError",
]
