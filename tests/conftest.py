import mpmath
import numpy as np
import pytest
from scipy.special import logsumexp


@pytest.fixture(autouse=True)
def _reset_mpmath_precision():
    """Every test starts at mpmath's default precision and cannot leak a change."""
    mpmath.mp.dps = 15
    yield
    mpmath.mp.dps = 15


def plain_prefix_row(scores, rho, t, sweeps=None, tol=1e-15):
    """Reference: last row of the prefix fixed point by the plain alternating log-domain
    iteration (no acceleration, no warm start, no kernel), written independently of otprior."""
    s = np.where(np.tril(np.ones((t, t), dtype=bool)), np.asarray(scores, float)[:t, :t], -np.inf)
    g = np.zeros(t)
    for _ in range(sweeps or 100_000):
        f = -logsumexp(s + g[None, :], axis=1)
        g_new = -rho * logsumexp(s + f[:, None], axis=0)
        done = np.max(np.abs(g_new - g)) <= tol * (1 - rho)
        g = g_new
        if done:
            break
    f = -logsumexp(s + g[None, :], axis=1)
    return np.exp(f[-1] + s[-1] + g)
