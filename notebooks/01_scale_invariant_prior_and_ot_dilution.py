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
# # The scale-invariant prior and the dilution of causal OT attention
#
# Causal masking forbids balanced (doubly stochastic) attention: a lower-triangular doubly
# stochastic matrix is the identity. The prefix-consistent operator keeps every row exact and
# softens the column constraint with a strength $\rho \in [0, 1)$
# ([Definition 1](../proofs/operator.md)). Row $t$ of the attention is the last row of the
# $t \times t$ fixed point, so what a query sees never depends on later tokens
# ([Lemma 2](../proofs/prefix_consistency.md)).

# %%
import matplotlib.pyplot as plt
import numpy as np
from IPython.display import display

import otprior
from otprior import plots
from otprior.symbolic import derive_scale_invariant_prior, dilution_limits

rng = np.random.default_rng(0)
S = rng.normal(size=(256, 256))
A = otprior.causal_ot_attention(S, rho=0.5)
print("rows sum to one:  ", np.allclose(A.sum(axis=1), 1.0))
print("prefix consistent:", np.allclose(otprior.causal_ot_attention(S[:100, :100], 0.5), A[:100, :100]))

# %% [markdown]
# The "full" variant balances the whole $n \times n$ matrix at once. It is not prefix
# consistent: appending tokens changes the attention of earlier rows.

# %%
full = otprior.causal_ot_attention(S, 0.5, variant="full")
full_prefix = otprior.causal_ot_attention(S[:100, :100], 0.5, variant="full")
print(f"full variant: early rows move by up to {np.abs(full[:100, :100] - full_prefix).max():.3f} when 156 tokens are appended")

# %% [markdown]
# ## The exact prior of constant scores
#
# For constant scores the fixed point is an exact prior $\pi_n(d)$ over distances
# ([Theorem 2](../proofs/constant_score_recurrence.md)). Rescaled by the context length it
# converges to the scale-invariant prior
# $F_\rho(\delta) = 1 - e^{-P^{-1}(1/q,\,\delta)}$ with $q = 1 - \rho$
# ([Theorem 3](../proofs/scale_invariant_prior.md)): the share of the nearest tenth of the
# context does not depend on the context length.

# %%
for n in (256, 4096, 65536):
    F_n = np.cumsum(otprior.ot_prior(n, 0.5))
    F = otprior.scale_invariant_cdf(np.arange(1, n + 1) / n, 0.5)
    print(f"n = {n:6d}:  sup |F_n - F_rho| = {np.abs(F_n - F).max():.1e}")

# %% mystnb={"image": {"alt": "Two panels: the CDF and the density of the scale-invariant prior of causal OT attention against relative distance for rho from 0 to 0.9, with the exact discrete prior at n = 2048 dotted on top of each curve."}}
fig = plots.plot_scale_invariant_prior()

# %% [markdown]
# Every step of the derivation is checked by sympy, and the result is a sympy expression.

# %%
derivation = derive_scale_invariant_prior()
for step in derivation.steps:
    print(f"{step.name:24s} verified = {step.verified}   {step.claim}")
display(derivation.cdf)

# %% [markdown]
# ## Dilution
#
# A window of the $W$ nearest keys keeps a vanishing share of attention, at the rate
# $m_t(W) \approx H_W^{(\rho)} (Z_q/t)^{1-\rho}$
# ([Theorem 4](../proofs/window_law.md)). Scores within $B$ of a constant change only the
# constant ([Theorem 5](../proofs/bounded_score_dilution.md)): the bound below holds for
# every such score matrix.

# %%
print(f"{'n':>7}  {'exact m_n(16)':>13}  {'window law':>10}  {'bound, |s-c| <= 0.25':>20}")
for n in (1024, 16384, 262144):
    exact = otprior.ot_window_mass(16, n, 0.5)
    law = otprior.ot_window_law(16, n, 0.5)
    bound = otprior.ot_dilution_bound(16, n, 0.5, 0.25)
    print(f"{n:>7}  {exact:13.5f}  {law:10.5f}  {bound:20.5f}")

# %% mystnb={"image": {"alt": "Log-log plot of the window mass of 16 keys against context length for rho = 0.3, 0.5, 0.7, 0.9: straight lines of slope minus (1 - rho), the window law dashed along the exact markers, and a band up to the bound for bounded content."}}
fig = plots.plot_ot_dilution()

# %% [markdown]
# The limits as $\rho$ varies ([Theorem 6](../proofs/limits_in_rho.md)): the dilution exponent
# is $1 - \rho$, and $Z_q^{\,q} \to 1/e$ as $\rho \to 1$.

# %% mystnb={"image": {"alt": "Left: the constant C_W(rho) of the window law against rho for windows 1, 4, 16 and 64, falling as rho grows. Right: Z_q to the power q falling from 1 at rho = 0 towards its limit 1/e as rho tends to 1."}}
limits = dilution_limits()
print("exponent of n:", limits.exponent)
print("Z_q^q ->", limits["normaliser_power"].expression)
fig = plots.plot_dilution_constants()

# %% [markdown]
# Every figure function takes `ax=`, so the figures compose into your own layouts:

# %% mystnb={"image": {"alt": "Two figures composed side by side: the exact prior of causal OT attention at n = 4096, rho = 0.5 against distance beside its scale-invariant approximation, and the window mass of 4 keys against length at rho = 0.5."}}
fig, (left, right) = plt.subplots(1, 2, figsize=(10, 3.6), layout="constrained")
plots.plot_ot_prior(4096, 0.5, ax=left)
plots.plot_ot_dilution(window=4, rhos=(0.5,), ax=right)
right.set_title("window of 4 keys, $\\rho = 0.5$")
plt.show()
