"""Redraw the figures the README shows (``docs/*.png``) with :mod:`otprior.plots`.

Run from the repository root: ``python docs/readme_figures.py``. The training-run figure reads
the stored results of ``bench/toy_extrapolation.py`` in ``bench/results/``.
"""

import json
from pathlib import Path

import matplotlib.pyplot as plt

from otprior import plots

DOCS = Path(__file__).resolve().parent
ROOT = DOCS.parent


def main():
    toy = json.loads((ROOT / "bench" / "results" / "toy_extrapolation.json").read_text())
    figures = {
        "log_distance_window_mass.png": plots.plot_log_distance_window_mass(),
        "margin_growth.png": plots.plot_margin_growth(),
        "toy_extrapolation.png": plots.plot_extrapolation(toy["runs"], train_length=toy["summary"]["train_length"], unit="byte"),
    }
    for name, fig in figures.items():
        fig.savefig(DOCS / name, dpi=150)
        plt.close(fig)
        print("wrote", DOCS / name)


if __name__ == "__main__":
    main()
