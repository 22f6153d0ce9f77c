import os
import tempfile

import mpmath
import numpy as np
import pytest
from hypothesis import HealthCheck, Phase, settings
from hypothesis.configuration import set_hypothesis_home_dir
from scipy.special import logsumexp

# Hypothesis: the same examples on every run (derandomize), no example database in the checkout (a failure
# found once must not make every later run fail, nor be shrunk again), and under CI no shrinking (a failure is
# reported at once; the test prints its case on one line). Profiles "ci" and "dev"; HYPOTHESIS_PROFILE picks
# one, else "ci" when the CI variable is set, else "dev".
settings.register_profile(
    "dev", derandomize=True, database=None, print_blob=False, suppress_health_check=[HealthCheck.too_slow]
)
settings.register_profile(
    "ci",
    derandomize=True,
    database=None,
    print_blob=False,
    phases=(Phase.explicit, Phase.generate),
    report_multiple_bugs=False,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE") or ("ci" if os.environ.get("CI") else "dev"))
# nothing of Hypothesis's (patches of failing examples, caches) is written into the checkout
set_hypothesis_home_dir(os.path.join(tempfile.gettempdir(), "otprior-hypothesis"))


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
