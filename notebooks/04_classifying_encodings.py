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
# # Classifying positional encodings: bounded or diluting
#
# An encoding is *bounded* when its distant attention mass $D_n(W)$ (beyond the $W$ nearest
# keys) stays away from one as the context grows, and *diluting* when it tends to one. For a
# relative bias $b(d)$ this holds exactly when $\sum_d e^{b(d)} < \infty$
# ([Theorem 11](../proofs/classification.md)).

# %%
import matplotlib.pyplot as plt
import numpy as np
import sympy as sp

import otprior
from otprior import plots
from otprior.encodings import CABLE, ALiBi, Bias, CausalOT, KerpleLog, LogDistance, T5Buckets

for enc in (ALiBi(1 / 16), KerpleLog(0.9, 1.0), KerpleLog(1.3, 1.0), T5Buckets(), CABLE(0.02), CausalOT(0.5)):
    v = otprior.classify(enc)
    limit = f"D_oo(64) = {v.limit_distant_mass(64):.4f}" if v.bounded else "D_n(64) -> 1"
    print(f"{enc!r:62} {v.kind:9} {limit}")
    print("    ", v.reason)

# %% [markdown]
# The map of the built-in families (the figure of the report):

# %% mystnb={"image": {"alt": "Two panels of distant mass against context length for the built-in encodings: bounded ones on the left level off below one at their marked limits, diluting ones on the right climb towards one."}}
fig = plots.plot_encoding_map()

# %% [markdown]
# ## Your own encoding
#
# Write the bias as a sympy expression in the distance. The verdict is decided by comparison
# with the log-distance and Bertrand series, and says why.

# %%
d = sp.Symbol("d")
bertrand = Bias(-sp.log(d + 1) - 2 * sp.log(sp.log(d + 3)))  # summable, barely
v = otprior.classify(bertrand)
print(v.kind, "-", v.reason)
print(f"D_oo(64) = {v.limit_distant_mass(64):.4f};  D_n(64) at n = 1e6: {bertrand.distant_mass(64, 10**6):.4f}")

# %% [markdown]
# A learned bias is often a Python function. Give its behaviour at long distances as a sympy
# expression: the verdict is decided on that, the numbers use your function.

# %%
learned = Bias(lambda x: -1.1 * np.log1p(x) + 0.3 * np.exp(-x / 50), asymptotic=-1.1 * sp.log(d))
print(otprior.classify(learned).kind)

# %% [markdown]
# Plot your encodings into your own axes, next to the built-in ones: solid lines are bounded,
# dashed lines dilute, triangles mark the limits $D_\infty(W)$. The learned bias gets no
# triangle: its limit could not be certified (two cut-offs disagree in the seventh digit), and
# otprior does not draw what it cannot certify.

# %% mystnb={"image": {"alt": "Distant mass against context length for two user-defined biases, a Bertrand bias and a learned one, beside log-distance with alpha = 1.05 and KERPLE-log with r1 = 0.9: the three bounded curves are solid, with limit triangles except for the learned bias, and the diluting KERPLE-log curve is dashed and climbs towards one."}}
fig, ax = plt.subplots(figsize=(6.5, 4), layout="constrained")
plots.plot_distant_mass(bertrand, label="Bertrand bias (mine)", ax=ax, marker="o", markevery=3)
plots.plot_distant_mass(learned, label="learned bias (mine)", ax=ax, marker="s", markevery=3)
plots.plot_distant_mass(LogDistance(1.05), label="log-distance, $\\alpha = 1.05$", ax=ax)
plots.plot_distant_mass(KerpleLog(0.9, 1.0), label="KERPLE-log, $r_1 = 0.9$", ax=ax)
ax.set_title("my encodings against two built-in ones")
ax.legend(loc="upper left", fontsize=8)
plt.show()
