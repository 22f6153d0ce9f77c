"""The one classification route: an encoding, alone or with a normaliser, under an attention structure.

It sits above the three families (:mod:`otprior.encodings`, :mod:`otprior.normalisers`,
:mod:`otprior.structures`), which import nothing from each other's ``classify``.
"""

from __future__ import annotations

__all__ = ["classify", "Verdicts"]


def _runs(indices) -> str:
    """``[0, 1, 2, 5, 7, 8]`` -> ``"0-2, 5, 7-8"``."""
    parts, start, prev = [], None, None
    for i in indices:
        if start is not None and i == prev + 1:
            prev = i
            continue
        if start is not None:
            parts.append(str(start) if start == prev else f"{start}-{prev}")
        start = prev = i
    if start is not None:
        parts.append(str(start) if start == prev else f"{start}-{prev}")
    return ", ".join(parts)


class Verdicts(tuple):
    """The per-head verdicts of a multi-head classification: a ``tuple`` of :class:`Verdict`.

    Everything a tuple does it does (indexing, iteration, ``len``, equality with a plain tuple of the
    same verdicts); only its ``repr`` differs: one line per kind, with the count and the heads
    (``0-59, 62``), instead of every head's verdict, so that 64 heads print in a few lines.

    Examples
    --------
    >>> from otprior.encodings import ALiBi
    >>> v = classify(ALiBi(heads=8))
    >>> len(v), v[0].kind, isinstance(v, tuple)
    (8, 'bounded', True)
    >>> v
    Verdicts(8 heads of ALiBi:
      bounded  8  heads 0-7)
    """

    __slots__ = ()

    def kinds(self) -> dict:
        """``{kind: (head, ...)}`` in the order the kinds first occur."""
        out = {}
        for h, v in enumerate(self):
            out.setdefault(v.kind, []).append(h)
        return {k: tuple(h) for k, h in out.items()}

    def __repr__(self):
        if not self:
            return "Verdicts()"
        kinds = self.kinds()
        width = max(len(k) for k in kinds)
        count = len(str(len(self)))
        first = self[0]
        what = type(first.encoding).__name__
        if first.normaliser is not None:
            what += f" with {type(first.normaliser).__name__}"
        lines = [f"  {k:<{width}}  {len(h):>{count}}  head{'s' if len(h) > 1 else ''} {_runs(h)}" for k, h in kinds.items()]
        return f"Verdicts({len(self)} head{'s' if len(self) > 1 else ''} of {what}:\n" + "\n".join(lines) + ")"

    def _repr_pretty_(self, p, cycle):  # IPython and Jupyter: the same summary
        p.text(repr(self))


def classify(encoding, normaliser=None, score_bound=None, *, structure=None):
    """Classify an encoding: bounded, diluting, oscillating, content-dependent or undecided.

    Parameters
    ----------
    encoding : Encoding or str
        An instance from :mod:`otprior.encodings` (multi-head: :class:`Verdicts`, a tuple of
        verdicts, one per head), or a registered name, built with its defaults as
        ``otprior.encodings.get(name)`` builds it (parameters: build it with ``get(name, **params)``).
    normaliser : Normaliser or str, optional
        From :mod:`otprior.normalisers` (a registered name is accepted); ``None`` is softmax.
    score_bound : float, optional
        The bound ``B`` on the content logits the normaliser sees (default: the encoding's
        ``score_bound``, its ``logit_bound`` times ``a^2`` under a RoPE attention factor ``a``,
        Theorem R). The command line has one flag for it, the encoding's ``--logit-bound``.
    structure : Structure or str, optional
        From :mod:`otprior.structures` (a registered name without parameters is accepted);
        ``None`` is full causal attention. Structures are analysed with softmax only
        (Theorems S1-S6, ``proofs/attention_structure.md``); a per-head structure (sinks) gives
        per-head verdicts.

    Returns
    -------
    Verdict or Verdicts
        ``.kind``, ``.bounded``, ``.reason``, ``.rate``, ``.threshold`` (content-dependent),
        ``.limit_distant_mass(W)``, ``.distant_mass_bounds(W)`` (liminf, limsup) and
        ``.window_mass(W, n)`` (the constant-score prior of the whole).

    Notes
    -----
    Theorem 11 (``proofs/classification.md``): with softmax and every key visible, bounded iff
    :math:`\\sum_d e^{b(d)} < \\infty`; a normaliser: Theorems N0-N6 (``proofs/normalisers.md``).
    "diluting" is said only where :math:`D_n(W) \\to 1` is proved; "oscillating" where
    :math:`D_n(W)` has no limit (its liminf and limsup are given).

    Examples
    --------
    >>> from otprior.encodings import ALiBi, KerpleLog, NoPE
    >>> classify(KerpleLog(0.9, 1.0)).kind
    'diluting'
    >>> round(classify(ALiBi(0.5)).limit_distant_mass(4), 6)   # e^(-2)
    0.135335
    >>> v = classify(NoPE(), "ssmax", score_bound=1.0)   # SSMax with s = 1: the window needs Delta >= 1
    >>> v.kind, v.threshold
    ('content-dependent', 1.0)
    >>> from otprior.structures import SlidingWindow, Chunked
    >>> round(classify(NoPE(), structure=SlidingWindow(96)).limit_distant_mass(64), 6)   # 32/96
    0.333333
    >>> classify(NoPE(), structure=Chunked(128)).distant_mass_bounds(64)   # (0, 64/128)
    (0.0, 0.5)
    >>> classify("nope", "ssmax", score_bound=1.0).kind   # names, as for the normaliser
    'content-dependent'
    """
    from dataclasses import replace

    from . import encodings as E
    from . import normalisers as N
    from . import structures as S
    from ._validation import SCORE_BOUND, DomainError
    from .encodings import Encoding

    if isinstance(encoding, str):
        E.lookup(encoding)  # an unknown name: refused with the registered names
        try:
            encoding = E.get(encoding)
        except DomainError as exc:
            raise DomainError(exc.parameter, exc.value, f"{exc.domain} (the name {encoding!r} alone builds the encoding with its defaults; "
                              f"give parameters as classify(otprior.encodings.get({encoding!r}, {exc.parameter}=...)))") from None
    if not isinstance(encoding, Encoding):
        raise DomainError("encoding", encoding, f"an instance of an otprior.encodings class or one of {', '.join(E.names())}")
    B = encoding.score_bound if score_bound is None else SCORE_BOUND.check(score_bound, "score_bound")
    if isinstance(structure, str):
        structure = S.get(structure)
    if structure is not None and not isinstance(structure, S.Structure):
        raise DomainError("structure", structure, f"an otprior.structures instance or one of {', '.join(S.names())}")
    if structure is not None and isinstance(structure, S.FullCausal):
        structure = None
    if isinstance(normaliser, str):
        normaliser = N.get(normaliser)
    if normaliser is not None and not isinstance(normaliser, N.Normaliser):
        raise DomainError("normaliser", normaliser, f"an otprior.normalisers instance or one of {', '.join(N.names())}")
    heads = encoding.per_head()
    sH = None if structure is None else structure.heads
    if heads is not None or sH is not None:
        if heads is not None and sH is not None and len(heads) != sH:
            raise DomainError("structure", structure, f"per-head parts for the encoding's {len(heads)} heads")
        count = len(heads) if heads is not None else sH
        singles = heads if heads is not None else (encoding,) * count
        return Verdicts(
            classify(e, normaliser, B, structure=None if structure is None else structure.for_head(h)) for h, e in enumerate(singles)
        )
    if structure is not None:
        if normaliser is not None and not isinstance(normaliser, N.Softmax):
            from .encodings._base import Verdict

            return Verdict(encoding, None, "undecided", f"{normaliser!r} under {structure!r} is not analysed (structures: softmax only).",
                           normaliser=normaliser, score_bound=B, structure=structure)
        v = structure.classify(encoding, B)
        return v if normaliser is None else replace(v, normaliser=normaliser)
    if normaliser is None:
        return replace(encoding._verdict(), score_bound=B)
    return normaliser.classify(encoding, B)
