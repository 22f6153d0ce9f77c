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
# # Choosing a margin for a training length and an evaluation range
#
# A model trained at length $L_0$ and evaluated up to $L_1$ with log-distance heads: how far
# above one must every head's exponent stay so that, under the prior alone, the distant mass
# (beyond the $W$ nearest keys) grows by at most `tol`?
# ([Theorem 9](../proofs/margin_selection.md))

# %%
import math
from decimal import ROUND_CEILING, ROUND_FLOOR, Decimal

import matplotlib.pyplot as plt
import numpy as np

import otprior
from otprior import plots

r = otprior.margin_for(64, (512, 8192), 0.05)
print(f"margin delta = {r.margin:.6f}: every exponent alpha >= {r.exponent:.6f} keeps the growth within 0.05")
print(f"growth at the margin: {r.growth:.6f}")
# the bracket's ends, rounded outward with two digits past the first place where they differ
lo, hi = r.bracket
places = max(6, 2 - math.floor(math.log10(hi - lo))) if hi > lo else 17
step = Decimal(10) ** -places
lo_text = Decimal(lo).quantize(step, rounding=ROUND_FLOOR)
hi_text = Decimal(hi).quantize(step, rounding=ROUND_CEILING)
print(f"certified bracket: [{lo_text}, {hi_text}], width {hi - lo:.1e}")

# %% [markdown]
# Check it from the definition, with the exact distant mass: every exponent above the margin
# keeps the growth within `tol`, and just below the margin it does not.

# %%
def growth(alpha, window=64, lengths=(512, 8192)):
    return otprior.distant_mass(window, lengths[1], alpha) - otprior.distant_mass(window, lengths[0], alpha)


above = [growth(a) for a in np.linspace(r.exponent, r.exponent + 3.0, 300)]
print("largest growth above the margin:", max(above))
print("growth just below the margin:   ", growth(r.exponent - 1e-6))

# %% mystnb={"image": {"alt": "Growth of the distant mass from 512 to 8192 tokens against the margin delta: the curve falls through the tolerance 0.05 at the certified margin, about 0.363, and every margin to the right of it is shaded as keeping the growth within tolerance."}}
fig = plots.plot_margin_growth()

# %% [markdown]
# ## Options a designer will want
#
# Relative instead of absolute growth; content scores within $B$ of a constant
# ([Theorem 10](../proofs/content_bound.md)); a different distance offset in
# $b(d) = -\alpha \log(d + o)$.

# %%
for options in ({}, {"growth": "relative"}, {"score_bound": 0.25}, {"offset": 2.0}):
    m = otprior.margin_for(64, (2048, 32768), 0.05, **options).margin
    print(f"{str(options):26}  margin = {m:.6f}")

# %% [markdown]
# How the margin depends on the window and the evaluation range, in one figure of your own:

# %% mystnb={"image": {"alt": "The margin against the evaluation range L1/L0 from 2 to 64 for windows of 16, 64 and 256 keys: each margin grows with the range, and larger windows need larger margins."}}
fig, ax = plt.subplots(figsize=(6, 3.6), layout="constrained")
ranges = [(512, 512 * k) for k in (2, 4, 8, 16, 32, 64)]
for window in (16, 64, 256):
    margins = [otprior.margin_for(window, L, 0.05).margin for L in ranges]
    ax.plot([L1 / L0 for L0, L1 in ranges], margins, marker="o", label=f"$W = {window}$")
ax.set(xscale="log", xlabel="evaluation range $L_1 / L_0$ ($L_0 = 512$)", ylabel="margin $\\delta$ (tol $= 0.05$)")
ax.set_xticks([2, 4, 8, 16, 32, 64], labels=["2", "4", "8", "16", "32", "64"])
ax.minorticks_off()
ax.legend()
plt.show()
