"""``python -m otprior.cli``: the ``otprior`` command (as ``python -m otprior``)."""

from ._main import main

if __name__ == "__main__":  # pragma: no cover - exercised through a subprocess in the tests
    raise SystemExit(main())
