"""otprior: positional priors of causal attention, computable and checkable.

The prefix-consistent causal unbalanced OT operator, its exact and scale-invariant
priors and dilution laws; log-distance priors with certified window-mass bounds;
margin selection; the bounded/diluting classification of positional encodings.
``proofs/`` states and proves each result.

The public names are imported on first use (PEP 562), so ``import otprior`` loads
neither scipy nor python-flint; ``from otprior import ot_prior`` and ``otprior.ot_prior``
work as if they had been imported eagerly.
"""

import importlib as _importlib
import sys as _sys
import types as _types

from ._validation import ConvergenceError, DomainError, PrecisionError

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

# public name -> submodule that defines it (None: the name is the submodule)
_SOURCES = {
    "encodings": None,
    "normalisers": None,
    "structures": None,
    "Enclosure": "_balls",
    "causal_ot_attention": "causal_ot",
    "causal_ot_fixed_point": "causal_ot",
    "ContentBand": "content_bound",
    "content_band": "content_bound",
    "classify": "classification",
    "Verdicts": "classification",
    "distant_mass": "log_distance",
    "distant_mass_bounds": "log_distance",
    "window_mass": "log_distance",
    "window_mass_bounds": "log_distance",
    "MarginResult": "margin",
    "NoMarginError": "margin",
    "margin_for": "margin",
    "DilutionBound": "ot_prior",
    "OTPrior": "ot_prior",
    "ot_dilution_bound": "ot_prior",
    "ot_prior": "ot_prior",
    "ot_window_law": "ot_prior",
    "ot_window_mass": "ot_prior",
    "ot_window_mass_bound": "ot_prior",
    "scale_invariant_cdf": "scale_invariant",
    "scale_invariant_density": "scale_invariant",
    "scale_invariant_normaliser": "scale_invariant",
}


def __getattr__(name):
    if name not in _SOURCES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    source = _SOURCES[name]
    if source is None:
        value = _importlib.import_module(f"{__name__}.{name}")
    else:
        value = getattr(_importlib.import_module(f"{__name__}.{source}"), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(__all__))


class _Package(_types.ModuleType):
    """The package module: importing the submodule ``otprior.ot_prior`` binds it on the
    package under the name of the public function ``ot_prior``; the function is kept."""

    def __setattr__(self, name, value):
        if name == "ot_prior" and isinstance(value, _types.ModuleType):
            value = value.ot_prior
        super().__setattr__(name, value)


_sys.modules[__name__].__class__ = _Package
