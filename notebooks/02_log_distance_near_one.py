# ---
# jupyter:
#   jupytext:
#     formats: py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Log-distance priors near exponent one
#
# The bias $b(d) = -\alpha \log(1 + d)$ gives the prior
# $\pi_n(d) = (d+1)^{-\alpha} / H_n^{(\alpha)}$. It is summable, hence bounded (the window
# keeps a share bounded away from zero), exactly when $\alpha > 1$
# ([Theorem 7](../proofs/log_distance_prior.md)). Near $\alpha = 1$ it still dilutes like
# exponent one at every length one can evaluate.

# %%
import math

import mpmath

import otprior
from otprior import plots

W = 64
H_W = sum((k + 1) ** -1.0 for k in range(W))
print(f"{'n':>6}  {'alpha = 1':>9}  {'alpha = 1.01':>12}  {'H_W / log n':>11}")
for k in (3, 6, 9, 12, 15, 18):
    n = 10**k
    print(f"{'1e' + str(k):>6}  {otprior.window_mass(W, n, 1.0):9.4f}  {otprior.window_mass(W, n, 1.01):12.4f}  {H_W / math.log(n):11.4f}")

# %% [markdown]
# ## Exact at any length, with certified brackets
#
# The masses are exact at any length, including $\alpha = 1 \pm 10^{-12}$ where the two
# Hurwitz zeta terms have poles. `window_mass_bounds` returns a two-sided bracket proved by
# Euler–Maclaurin with an explicit remainder
# ([Theorem 8](../proofs/window_mass_bounds.md)); its width is what to quote.

# %%
for alpha in (1 - 1e-12, 1.0, 1 + 1e-12):
    m = otprior.window_mass(W, 10**15, alpha)
    lo, hi = otprior.window_mass_bounds(W, 10**15, alpha)
    print(f"alpha = {alpha!r:20}  m = {m:.16f}  relative bracket width {(hi - lo) / m:.1e}")

# %% [markdown]
# With `dps=` the mass comes as an mpmath number correct to that many digits. Print it with
# `mpmath.nstr`: `print` shows mpmath's default 15 digits whatever the precision computed.

# %%
m40 = otprior.window_mass(W, 10**15, 1.0, dps=40)
print("40 digits:", mpmath.nstr(m40, 40))
print("double:   ", repr(otprior.window_mass(W, 10**15, 1.0)))

# %% [markdown]
# ## The picture
#
# Solid lines are summable exponents, dashed ones are not; the triangles mark the limits
# $m_\infty(W) = H_W^{(\alpha)} / \zeta(\alpha)$ that the summable priors approach only at
# astronomically long contexts. The bands cover every content score within $\pm 0.25$ of a
# constant ([Theorem 10](../proofs/content_bound.md)).

# %% mystnb={"image": {"alt": "Log-log plot of the window mass of 64 keys against context length up to 10^15 for exponents 0.9 to 1.3: the diluting exponents 0.9 and 1 keep falling, the summable ones flatten slowly towards their limits marked by triangles, each with a band for content within 0.25."}}
fig = plots.plot_log_distance_window_mass()
