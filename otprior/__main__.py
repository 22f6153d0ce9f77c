"""``python -m otprior``: the ``otprior`` command."""

from .cli import main

if __name__ == "__main__":  # pragma: no cover - exercised through a subprocess in the tests
    raise SystemExit(main())
