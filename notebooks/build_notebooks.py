"""Write the notebooks of this folder from their cell sources (outputs stripped).

Run ``python notebooks/build_notebooks.py`` after editing a cell below; CI executes the
written notebooks (tests/test_notebooks.py).
"""

from pathlib import Path

import nbformat

HERE = Path(__file__).resolve().parent

NOTEBOOKS = {
    "01_scale_invariant_prior_and_ot_dilution.ipynb": [
        ("md", "# The scale-invariant prior and the dilution of causal OT attention\n\nCausal masking forbids balanced (doubly stochastic) attention: a lower-triangular doubly stochastic matrix is the identity. The prefix-consistent operator keeps rows exact and softens columns with strength ρ ([Definition 1](../proofs/operator.md))."),
        ("code", "import numpy as np\nimport otprior\nfrom otprior import plots\n\nrng = np.random.default_rng(0)\nS = rng.normal(size=(256, 256))\nA = otprior.causal_ot_attention(S, rho=0.5)\nprint('rows sum to one:', np.allclose(A.sum(axis=1), 1))\nprint('prefix consistent:', np.allclose(otprior.causal_ot_attention(S[:100, :100], 0.5), A[:100, :100]))\nfull = otprior.causal_ot_attention(S, 0.5, variant='full')\nprint('the full-matrix variant changes early rows by', np.abs(full[:100, :100] - otprior.causal_ot_attention(S[:100, :100], 0.5, variant='full')).max())"),
        ("md", "For constant scores the fixed point is an exact prior ([Theorem 2](../proofs/constant_score_recurrence.md)); rescaled by the context length it converges to the scale-invariant prior $F_\\rho(\\delta) = 1 - e^{-P^{-1}(1/q,\\delta)}$ ([Theorem 3](../proofs/scale_invariant_prior.md))."),
        ("code", "for n in (256, 4096, 65536):\n    F = np.cumsum(otprior.ot_prior(n, 0.5))\n    err = np.abs(F - otprior.scale_invariant_cdf(np.arange(1, n + 1) / n, 0.5)).max()\n    print(f'n = {n:6d}: sup |F_n - F| = {err:.2e}')\nplots.plot_scale_invariant_prior();"),
        ("md", "The symbolic derivation: every step checked by sympy."),
        ("code", "from otprior.symbolic import derive_scale_invariant_prior, dilution_limits\nd = derive_scale_invariant_prior()\nfor step in d.steps:\n    print(f'{step.name:22s} verified={step.verified}  {step.claim}')\nd.cdf"),
        ("md", "Dilution: every fixed window gets a vanishing share, at rate $t^{-(1-\\rho)}$ ([Theorem 4](../proofs/window_law.md)), and bounded scores change only the constant ([Theorem 5](../proofs/bounded_score_dilution.md))."),
        ("code", "for n in (1024, 16384, 262144):\n    print(n, otprior.ot_window_mass(16, n, 0.5), otprior.ot_window_law(16, n, 0.5), otprior.ot_dilution_bound(16, n, 0.5, 0.25))\nlim = dilution_limits()\nprint('exponent:', lim.exponent, '| Z_q^q ->', lim['normaliser_power'].expression)\nplots.plot_ot_dilution();"),
    ],
    "02_log_distance_near_one.ipynb": [
        ("md", "# Log-distance priors near exponent one\n\nThe bias $-\\alpha\\log(1+d)$ gives the prior $(d+1)^{-\\alpha}/H_n^{(\\alpha)}$. It is summable, hence bounded, iff $\\alpha > 1$ ([Theorem 7](../proofs/log_distance_prior.md)). Yet near $\\alpha = 1$ it dilutes like exponent one at every length one can evaluate."),
        ("code", "import math\nimport otprior\nfrom otprior import plots\n\nW = 64\nH = sum((k + 1) ** -1.0 for k in range(W))\nfor n in (10**3, 10**6, 10**9, 10**12, 10**15, 10**18):\n    print(f'n = 1e{round(math.log10(n)):2d}:  alpha = 1: {otprior.window_mass(W, n, 1.0):.4f}   alpha = 1.01: {otprior.window_mass(W, n, 1.01):.4f}   H_W / log n = {H / math.log(n):.4f}')"),
        ("md", "Exact at any length, including $\\alpha = 1 \\pm 10^{-12}$ where the two Hurwitz zeta terms have poles; and certified two-sided bounds from Euler–Maclaurin with explicit remainders ([Theorem 8](../proofs/window_mass_bounds.md))."),
        ("code", "for alpha in (1 - 1e-12, 1.0, 1 + 1e-12):\n    m = otprior.window_mass(W, 10**15, alpha)\n    lo, hi = otprior.window_mass_bounds(W, 10**15, alpha)\n    print(f'{alpha!r:22} m = {m:.16f}  bracket width {(hi - lo) / m:.1e}')\nprint('40 digits:', otprior.window_mass(W, 10**15, 1.0, dps=40))\nplots.plot_log_distance_window_mass();"),
    ],
    "03_choosing_a_margin.ipynb": [
        ("md", "# Choosing a margin for a training length and an evaluation range\n\nHow far above one must every head's exponent stay so that, under the prior alone, distant mass grows by at most `tol` from the training length to the longest evaluation length? ([Theorem 9](../proofs/margin_selection.md))"),
        ("code", "import numpy as np\nimport otprior\nfrom otprior import plots\n\nr = otprior.margin_for(64, (512, 8192), 0.05)\nprint(r.margin, r.exponent, r.growth, r.bracket)"),
        ("md", "Check it directly: every exponent above the margin keeps the growth within tol; slightly below it does not."),
        ("code", "def growth(alpha):\n    return otprior.distant_mass(64, 8192, alpha) - otprior.distant_mass(64, 512, alpha)\n\nassert all(growth(a) <= 0.05 for a in np.linspace(r.exponent, r.exponent + 3, 300))\nprint('just below the margin:', growth(r.exponent - 1e-6))\nplots.plot_margin_growth();"),
        ("md", "Options a designer will want: relative growth, content scores within B of a constant ([Theorem 10](../proofs/content_bound.md)), and the distance offset."),
        ("code", "for kw in ({}, {'growth': 'relative'}, {'score_bound': 0.25}, {'offset': 2.0}):\n    print(kw, round(otprior.margin_for(64, (2048, 32768), 0.05, **kw).margin, 6))"),
    ],
    "04_classifying_encodings.ipynb": [
        ("md", "# Classifying positional encodings: bounded or diluting\n\nAn encoding is bounded when its distant attention mass stays away from one. For a relative bias this holds iff $\\sum_d e^{b(d)} < \\infty$ ([Theorem 11](../proofs/classification.md))."),
        ("code", "import numpy as np\nimport sympy as sp\nimport otprior\nfrom otprior import plots\nfrom otprior.encodings import ALiBi, KerpleLog, T5Buckets, CABLE, CausalOT, Bias\n\nfor enc in (ALiBi(1 / 16), KerpleLog(0.9, 1.0), KerpleLog(1.3, 1.0), T5Buckets(), CABLE(0.02), CausalOT(0.5)):\n    v = otprior.classify(enc)\n    print(f'{enc!r:45} {v.kind:9} D_oo(64) = {v.limit_distant_mass(64):.4f}')\n    print('   ', v.reason)"),
        ("md", "Your own encoding: a sympy expression in the distance, or a Python callable with its asymptotic form."),
        ("code", "d = sp.Symbol('d')\nmine = Bias(-sp.log(d + 1) - 2 * sp.log(sp.log(d + 3)))  # a Bertrand bias: summable, barely\nv = otprior.classify(mine)\nprint(v.kind, '-', v.reason)\nprint('D_oo(64) =', v.limit_distant_mass(64), ' D_n at n = 1e6:', mine.distant_mass(64, 10**6))\nlearned = Bias(lambda x: -1.1 * np.log1p(x) + 0.3 * np.exp(-x / 50), asymptotic=-1.1 * sp.log(d))\nprint(otprior.classify(learned).kind)\nplots.plot_encoding_map();"),
    ],
}


def main():
    for name, cells in NOTEBOOKS.items():
        nb = nbformat.v4.new_notebook()
        nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
        nb.cells = [nbformat.v4.new_markdown_cell(src) if kind == "md" else nbformat.v4.new_code_cell(src) for kind, src in cells]
        nbformat.write(nb, HERE / name)


if __name__ == "__main__":
    main()
