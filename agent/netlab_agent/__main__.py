"""``python -m netlab_agent``: the entry point the controller runs over SSH."""

from .server import main

if __name__ == "__main__":
    raise SystemExit(main())
