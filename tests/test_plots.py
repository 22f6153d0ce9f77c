"""Every figure function returns a Figure with labelled axes."""

import matplotlib

matplotlib.use("Agg")

import pytest  # noqa: E402

import otprior.plots as P  # noqa: E402


@pytest.mark.parametrize("name", P.__all__)
def test_figure_has_labelled_axes(name):
    func = getattr(P, name)
    fig = func(256, 0.5) if name == "plot_ot_prior" else func()
    assert isinstance(fig, matplotlib.figure.Figure)
    for ax in fig.axes:
        assert ax.get_xlabel() and ax.get_ylabel() and ax.get_title()
        assert ax.has_data()
    matplotlib.pyplot.close(fig)
