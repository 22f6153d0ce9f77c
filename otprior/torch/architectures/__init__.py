"""The architectures registry: one file per family of models, mapping its config to scheme + structure.

Each file registers :class:`Architecture` records (``register``) for the ``model_type`` values of its
family: how the config names the positional scheme (``scheme``), learned absolute positions
(``absolute``), or why the family is refused and what can still be said (``refusal``). The reader
(``otprior.torch._checkpoint``) asks :func:`lookup` first and falls back on the tensor names. The
per-layer structure (windows, chunks, caps, sinks) is read for every family alike by
``otprior.torch._structure``. Adding a family is one file here, imported below, and its test.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Architecture", "register", "lookup", "names", "REGISTRY"]

REGISTRY: dict = {}


@dataclass(frozen=True)
class Architecture:
    """One family.

    Attributes
    ----------
    family : str
        The family's name.
    model_types : tuple of str
        The config ``model_type`` values it covers.
    scheme : callable or None
        ``(cfg, family, implementation, rope) -> (scheme, encoding_params, note)`` from the config
        (``cfg`` the reader's typed config, ``rope(cfg, family=...)`` the RoPE keyword reader).
    early : bool
        Decided before the generic keys (``pos_emb``, ``alibi``) are looked at.
    absolute : tuple or None
        ``(config key of the table size, "learned" or "sinusoidal")`` for absolute positions.
    refusal : str or None
        Why the family is refused, and what can still be said.
    """

    family: str
    model_types: tuple
    scheme: object = None
    early: bool = False
    absolute: tuple | None = None
    refusal: str | None = None


def register(arch: Architecture) -> Architecture:
    for t in arch.model_types:
        if t in REGISTRY and REGISTRY[t] is not arch:
            raise TypeError(f"model_type {t!r} registered twice ({REGISTRY[t].family}, {arch.family})")
        REGISTRY[t] = arch
    return arch


def lookup(model_type) -> Architecture | None:
    """The family registered for ``model_type``, or None."""
    return REGISTRY.get(model_type) if isinstance(model_type, str) else None


def names() -> tuple:
    """The registered model types."""
    return tuple(REGISTRY)


from . import absolute, alibi, rope, state_space, t5  # noqa: E402,F401  (each file registers its families)
