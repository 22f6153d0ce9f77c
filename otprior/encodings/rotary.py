"""Rotary encodings (RoPE) and their ``rope_scaling`` variants, and NoPE.

RoPE adds no bias: it rotates queries and keys by position. Every scaling type changes the
rotation frequencies (the inverse frequencies below reproduce ``transformers``'
``ROPE_INIT_FUNCTIONS``) and some multiply cos and sin by an *attention factor* ``a``.
Theorem R (``proofs/rope_scaling.md``): rotations are isometries, so the frequencies never
change the bound on a logit; the factor multiplies both the rotated query and key, so a
logit bound ``B`` on the unscaled logits becomes exactly :math:`a^2 B`. The verdict is the
one of a bias-free encoding with content bound :math:`a^2 B`: diluting, with
:math:`1 - D_n(W) \\le W e^{2a^2B}/n`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from types import MappingProxyType

import numpy as np

from .._registry import param
from .._validation import DomainError, check_int, check_real, real_array
from ._base import Encoding, Verdict, nonneg, register
from ._certified import ONE, uniform_masses

__all__ = ["NoPE", "RoPE", "YaRN", "ROPE_TYPES", "rope_inverse_frequencies"]

MAX_HEAD_DIM = 2**24  # far above any model's; keeps head_dim * partial_rotary_factor and the frequency arrays finite and small
ROPE_TYPES = ("default", "linear", "dynamic", "yarn", "llama3", "longrope")


def _uniform_masses(window, n):
    return window / n, (n - window) / n


def _exp_text(x, shown=None):
    """``e^x`` as text: a double while it is one, then ``a e+k`` while ``k`` is short, then
    ``10^k`` (B up to 1.8e308 is accepted; ``shown`` names ``x`` where it overflows itself)."""
    if not math.isfinite(x):
        return f"e^({shown})"
    if x < 700.0:
        return f"{math.exp(x):.4g}"
    exponent = x / math.log(10.0)
    if exponent >= 1e15:
        return f"10^({exponent:.4g})"
    whole = math.floor(exponent)
    return f"{10.0 ** (exponent - whole):.4g}e+{whole:.0f}"


def _diluting_bias_free(encoding, B, prefix=""):
    return Verdict(
        encoding,
        False,
        "diluting",
        prefix + f"no summable bias; with content logits bounded by B = {B:.6g}, the window mass is at most "
        "W e^(2B) / n -> 0 (Theorem 10 with b = 0).",
        f"1 - D_n(W) <= W e^{{2B}} / n = {_exp_text(2 * B, f'2 x {B:.4g}')} W / n",
    )


class _BiasFree(Encoding):
    """An encoding without a bias (:math:`b = 0`): the uniform prior, :math:`D_n(W) = 1 - W/n`."""

    def bias(self, d, n=None):
        return np.zeros_like(np.asarray(d, dtype=float))

    def _masses(self, window, n):
        return _uniform_masses(window, n)

    def far_profile(self, window):
        return ("constant-tail", 0.0, -math.inf, 0.0)

    def _certified(self, window, n):
        return uniform_masses(window, n)  # Theorem 16a: W/n exactly

    def _limit_certified(self, window):
        return ONE  # diluting: D_n(W) = 1 - W/n -> 1


@register
@dataclass(frozen=True, repr=False)
class NoPE(_BiasFree):
    """No positional bias: :math:`b(d) = 0`, uniform prior, :math:`D_n = 1 - W/n` (diluting)."""

    name = "nope"

    logit_bound: float = param(0.0, doc="bound B >= 0 on |content logit - constant|")

    def __post_init__(self):
        object.__setattr__(self, "logit_bound", nonneg(self.logit_bound, "logit_bound"))

    def _verdict(self):
        return Verdict(self, False, "diluting", "b(d) = 0 is not summable: the prior is uniform, D_n(W) = 1 - W/n -> 1.", "1 - D_n(W) = W/n")


def _opt_real(v, name, **kw):
    return None if v is None else check_real(v, name, **kw)


def _opt_int(v, name):
    return None if v is None else check_int(v, name)


@register
@dataclass(frozen=True, repr=False)
class RoPE(_BiasFree):
    """Rotary encoding with logits bounded by ``logit_bound``, and any ``rope_scaling`` type.

    Parameters follow a ``transformers`` config's ``rope_parameters`` (``rope_scaling``):
    ``rope_type`` in :data:`ROPE_TYPES`, ``factor``, ``original_max_position_embeddings``,
    ``attention_factor``, ``mscale``, ``mscale_all_dim``, ``truncate``, ``beta_fast``,
    ``beta_slow`` (yarn), ``low_freq_factor``, ``high_freq_factor`` (llama3),
    ``short_factor``, ``long_factor`` (longrope), with ``head_dim``, ``rope_theta``,
    ``partial_rotary_factor``, ``max_position_embeddings`` and the current ``seq_len``
    (dynamic, longrope).
    """

    name = "rope"

    logit_bound: float = param(doc="bound B >= 0 on |q.k| / sqrt(head_dim) before the attention factor")
    rope_type: str = param("default", doc="rope_scaling type", choices=ROPE_TYPES, kw_only=True)
    head_dim: int = param(128, doc="head dimension", kw_only=True)
    rope_theta: float = param(10000.0, doc="base period theta > 1", kw_only=True)
    partial_rotary_factor: float = param(1.0, doc="fraction of the head dimension rotated, in (0, 1]", kw_only=True)
    factor: float | None = param(None, doc="scaling factor (linear, dynamic, yarn, llama3, longrope)", kw_only=True)
    original_max_position_embeddings: int | None = param(None, doc="pre-training context length (yarn, llama3, longrope)", kw_only=True)
    max_position_embeddings: int | None = param(None, doc="the config's max_position_embeddings", kw_only=True)
    seq_len: int | None = param(None, doc="current sequence length (dynamic, longrope)", kw_only=True)
    attention_factor: float | None = param(None, doc="yarn/longrope factor on cos and sin (default: derived)", kw_only=True)
    mscale: float | None = param(None, doc="yarn mscale", kw_only=True)
    mscale_all_dim: float | None = param(None, doc="yarn mscale_all_dim", kw_only=True)
    truncate: bool = param(True, doc="yarn: round the correction range to integers", kw_only=True)
    beta_fast: float | None = param(None, doc="yarn beta_fast (default 32)", kw_only=True)
    beta_slow: float | None = param(None, doc="yarn beta_slow (default 1)", kw_only=True)
    low_freq_factor: float | None = param(None, doc="llama3 low_freq_factor", kw_only=True)
    high_freq_factor: float | None = param(None, doc="llama3 high_freq_factor", kw_only=True)
    short_factor: tuple | None = param(None, doc="longrope short_factor (head_dim/2 values)", kw_only=True)
    long_factor: tuple | None = param(None, doc="longrope long_factor (head_dim/2 values)", kw_only=True)

    def __post_init__(self):
        s = object.__setattr__
        s(self, "logit_bound", nonneg(self.logit_bound, "logit_bound"))
        if self.rope_type not in ROPE_TYPES:
            raise DomainError("rope_type", self.rope_type, f"one of {', '.join(ROPE_TYPES)}")
        s(self, "head_dim", check_int(self.head_dim, "head_dim", minimum=2, maximum=MAX_HEAD_DIM))
        s(self, "rope_theta", check_real(self.rope_theta, "rope_theta", low=1.0, low_open=True))
        s(self, "partial_rotary_factor", check_real(self.partial_rotary_factor, "partial_rotary_factor", low=0.0, high=1.0, low_open=True))
        if int(self.head_dim * self.partial_rotary_factor) < 2:
            raise DomainError("partial_rotary_factor", self.partial_rotary_factor, "a fraction leaving at least 2 rotated dimensions")
        s(self, "factor", _opt_real(self.factor, "factor", low=0.0, low_open=True))
        s(self, "original_max_position_embeddings", _opt_int(self.original_max_position_embeddings, "original_max_position_embeddings"))
        s(self, "max_position_embeddings", _opt_int(self.max_position_embeddings, "max_position_embeddings"))
        s(self, "seq_len", _opt_int(self.seq_len, "seq_len"))
        s(self, "attention_factor", _opt_real(self.attention_factor, "attention_factor", low=0.0, low_open=True))
        s(self, "mscale", _opt_real(self.mscale, "mscale"))
        s(self, "mscale_all_dim", _opt_real(self.mscale_all_dim, "mscale_all_dim"))
        s(self, "beta_fast", _opt_real(self.beta_fast, "beta_fast", low=0.0, low_open=True))
        s(self, "beta_slow", _opt_real(self.beta_slow, "beta_slow", low=0.0, low_open=True))
        s(self, "low_freq_factor", _opt_real(self.low_freq_factor, "low_freq_factor", low=0.0, low_open=True))
        s(self, "high_freq_factor", _opt_real(self.high_freq_factor, "high_freq_factor", low=0.0, low_open=True))
        if not isinstance(self.truncate, (bool, np.bool_)):
            raise DomainError("truncate", self.truncate, "True or False")
        s(self, "truncate", bool(self.truncate))
        half = self.rotary_dim // 2
        for name in ("short_factor", "long_factor"):
            v = getattr(self, name)
            if v is not None:
                arr = real_array(v, name, f"{half} positive finite values (rotary_dim / 2)").ravel()
                if arr.size != half or not np.all(np.isfinite(arr)) or np.any(arr <= 0):
                    raise DomainError(name, f"{arr.size} values", f"{half} positive finite values (rotary_dim / 2)")
                s(self, name, tuple(float(x) for x in arr))
        need = {
            "linear": ("factor",),
            "dynamic": ("factor", "max_position_embeddings"),
            "yarn": ("original_max_position_embeddings",),
            "llama3": ("factor", "low_freq_factor", "high_freq_factor", "original_max_position_embeddings"),
            "longrope": ("short_factor", "long_factor", "original_max_position_embeddings"),
        }.get(self.rope_type, ())
        for name in need:
            if getattr(self, name) is None:
                raise DomainError(name, None, f"a value for rope_type={self.rope_type!r}")
        if self.rope_type == "yarn" and self.factor is None and self.max_position_embeddings is None:
            raise DomainError("factor", None, "a value (or max_position_embeddings) for rope_type='yarn'")
        if self.rope_type == "llama3" and self.high_freq_factor == self.low_freq_factor:
            raise DomainError("high_freq_factor", self.high_freq_factor, "a value different from low_freq_factor")

    @property
    def rotary_dim(self) -> int:
        return int(self.head_dim * self.partial_rotary_factor)

    def _factor(self):
        if self.factor is None and self.rope_type in ("yarn", "longrope"):
            return self.max_position_embeddings / self.original_max_position_embeddings
        return self.factor

    @property
    def cos_sin_factor(self) -> float:
        """The attention factor ``a`` that multiplies cos and sin (1 where the type has none)."""
        if self.rope_type == "yarn":
            if self.attention_factor is not None:
                return self.attention_factor
            f = self._factor()

            def get_mscale(scale, mscale=1.0):
                return 1.0 if scale <= 1 else 0.1 * mscale * math.log(scale) + 1.0

            if self.mscale and self.mscale_all_dim:
                return float(get_mscale(f, self.mscale) / get_mscale(f, self.mscale_all_dim))
            return get_mscale(f)
        if self.rope_type == "longrope":
            if self.attention_factor is not None:
                return self.attention_factor
            f = self._factor()
            if f <= 1.0:
                return 1.0
            return math.sqrt(1 + math.log(f) / math.log(self.original_max_position_embeddings))
        return 1.0

    @property
    def score_bound(self) -> float:
        """``a^2 B`` (``max(a^2, 1) B`` when only part of the head rotates): the logit bound after the factor (Theorem R)."""
        a2 = self.cos_sin_factor**2
        if self.partial_rotary_factor < 1.0:
            a2 = max(a2, 1.0)  # the pass-through dimensions keep factor 1
        return self.logit_bound * a2

    def inverse_frequencies(self, seq_len=None) -> np.ndarray:
        """The rotation frequencies (float64), as :func:`rope_inverse_frequencies`."""
        return rope_inverse_frequencies(self, seq_len)

    def _verdict(self):
        a = self.cos_sin_factor
        pre = "RoPE: "
        if a != 1.0:
            pre = f"RoPE ({self.rope_type}): cos and sin carry the factor a = {a:.6g}, so the logit bound is a^2 B = {self.score_bound:.6g}; "
        return _diluting_bias_free(self, self.score_bound, pre)


def rope_inverse_frequencies(rope: RoPE, seq_len=None) -> np.ndarray:
    """Inverse frequencies of ``rope`` as ``transformers``' ``ROPE_INIT_FUNCTIONS[rope_type]`` computes them.

    Evaluated in float64 (the library evaluates the same formulas in float32). ``seq_len``
    overrides ``rope.seq_len`` (dynamic: the current length; longrope: long factors beyond
    the original length).
    """
    dim = rope.rotary_dim
    base = rope.rope_theta
    seq_len = rope.seq_len if seq_len is None else check_int(seq_len, "seq_len")
    exps = np.arange(0, dim, 2, dtype=float) / dim
    t = rope.rope_type
    if t == "default":
        return 1.0 / base**exps
    if t == "linear":
        return 1.0 / base**exps / rope.factor
    if t == "dynamic":
        mp = rope.max_position_embeddings
        L = mp if seq_len is None else max(seq_len, mp)
        f = rope.factor
        base = base * ((f * L / mp) - (f - 1)) ** (dim / (dim - 2))
        return 1.0 / base**exps
    if t == "llama3":
        inv = 1.0 / base**exps
        f, lo, hi, old = rope.factor, rope.low_freq_factor, rope.high_freq_factor, rope.original_max_position_embeddings
        low_wavelen, high_wavelen = old / lo, old / hi
        wavelen = 2 * math.pi / inv
        out = np.where(wavelen > low_wavelen, inv / f, inv)
        smooth = (old / wavelen - lo) / (hi - lo)
        smoothed = (1 - smooth) * out / f + smooth * out
        medium = ~(wavelen < high_wavelen) & ~(wavelen > low_wavelen)
        return np.where(medium, smoothed, out)
    if t == "longrope":
        use_long = seq_len is not None and seq_len > rope.original_max_position_embeddings
        ext = np.asarray(rope.long_factor if use_long else rope.short_factor, dtype=float)
        return 1.0 / (ext * base**exps)
    # yarn
    f = rope._factor()
    beta_fast = rope.beta_fast or 32
    beta_slow = rope.beta_slow or 1
    orig = rope.original_max_position_embeddings

    def correction_dim(rotations):
        return (dim * math.log(orig / (rotations * 2 * math.pi))) / (2 * math.log(base))

    low, high = correction_dim(beta_fast), correction_dim(beta_slow)
    if rope.truncate:
        low, high = math.floor(low), math.ceil(high)
    low, high = max(low, 0), min(high, dim - 1)
    if low == high:
        high += 0.001  # as the library: prevents a singular ramp
    ramp = np.clip((np.arange(dim // 2, dtype=float) - low) / (high - low), 0.0, 1.0)
    keep = 1.0 - ramp
    pos = base**exps
    return (1.0 / (f * pos)) * (1.0 - keep) + (1.0 / pos) * keep


@register
@dataclass(frozen=True, repr=False)
class YaRN(_BiasFree):
    """RoPE with YaRN scaling (``rope_type="yarn"``), its parameters named as in a ``transformers`` config.

    ``YaRN(factor, logit_bound, original_max_position_embeddings=L, ...)`` is
    ``RoPE(logit_bound, rope_type="yarn", factor=factor, original_max_position_embeddings=L, ...)``:
    the keywords of ``rope_scaling`` (``_compute_yarn_parameters``), one spelling each. The
    former spellings ``scale`` and ``original_max_position`` are refused with a
    :class:`~otprior.DomainError` (``RenamedError``) that names the new one. The attention
    factor (``0.1 ln s + 1`` for ``s = factor`` by default, or from ``mscale``/``mscale_all_dim``,
    or given) scales the logit bound by its square (Theorem R). The verdict stays diluting.
    """

    name = "yarn"
    #: Former keyword -> the ``transformers`` name that replaced it (refused, naming the new one).
    renamed = MappingProxyType({"scale": "factor", "original_max_position": "original_max_position_embeddings"})
    renamed_reason = "the names of transformers' rope_scaling"

    factor: float = param(doc="context scale factor s >= 1 (rope_scaling factor)")
    logit_bound: float = param(doc="bound B >= 0 on |q.k| / sqrt(head_dim) before the attention factor")
    original_max_position_embeddings: int = param(4096, doc="pre-training context length (rope_scaling original_max_position_embeddings)",
                                                  kw_only=True)
    beta_fast: float = param(32.0, doc="beta_fast > 0", kw_only=True)
    beta_slow: float = param(1.0, doc="beta_slow > 0", kw_only=True)
    attention_factor: float | None = param(None, doc="factor on cos and sin (default: derived from factor and mscale)", kw_only=True)
    mscale: float | None = param(None, doc="mscale", kw_only=True)
    mscale_all_dim: float | None = param(None, doc="mscale_all_dim", kw_only=True)
    truncate: bool = param(True, doc="round the correction range to integers", kw_only=True)
    head_dim: int = param(128, doc="head dimension", kw_only=True)
    rope_theta: float = param(10000.0, doc="base period theta > 1", kw_only=True)

    def __post_init__(self):
        object.__setattr__(self, "factor", check_real(self.factor, "factor", low=1.0))
        object.__setattr__(self, "logit_bound", nonneg(self.logit_bound, "logit_bound"))
        object.__setattr__(self, "original_max_position_embeddings",
                           check_int(self.original_max_position_embeddings, "original_max_position_embeddings"))
        self.rope  # noqa: B018 - validates the remaining keywords

    @property
    def rope(self) -> RoPE:
        """The same encoding as a :class:`RoPE` with ``rope_type="yarn"``."""
        return RoPE(
            self.logit_bound,
            rope_type="yarn",
            factor=self.factor,
            original_max_position_embeddings=self.original_max_position_embeddings,
            beta_fast=self.beta_fast,
            beta_slow=self.beta_slow,
            attention_factor=self.attention_factor,
            mscale=self.mscale,
            mscale_all_dim=self.mscale_all_dim,
            truncate=self.truncate,
            head_dim=self.head_dim,
            rope_theta=self.rope_theta,
        )

    @property
    def cos_sin_factor(self) -> float:
        return self.rope.cos_sin_factor

    @property
    def score_bound(self) -> float:
        return self.rope.score_bound

    def inverse_frequencies(self) -> np.ndarray:
        return self.rope.inverse_frequencies()

    def _verdict(self):
        a = self.cos_sin_factor
        return _diluting_bias_free(
            self,
            self.score_bound,
            f"YaRN multiplies cos and sin by a = {a:.6g}, so logits scale by a^2 = {a * a:.6g} and the bound becomes "
            f"B = {self.score_bound:.6g}, not the verdict: ",
        )
