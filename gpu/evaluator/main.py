# Entry script of the opforge evaluator: `python3 gpu/evaluator/main.py --device DEV [--lib PATH] [--cache-dir DIR] [--mem-fraction X]`, as the supervisor runs it.
"""The one way to start the evaluator, from the source tree or from the installed copy
(share/opforge/evaluator/main.py). Python puts this file's folder first on sys.path; it
is replaced by the folder holding the package, so that the package imports as
`evaluator` and its modules (task, graph, ...) are not top-level modules that task code
could import or that could shadow others."""

import os
import sys


def _package_parent_first():
    """Puts the folder holding this package first on sys.path, in place of the package
    folder itself when Python put that there."""
    pkg_dir = os.path.dirname(os.path.realpath(__file__))
    parent = os.path.dirname(pkg_dir)
    if sys.path and os.path.realpath(sys.path[0] or os.curdir) == pkg_dir:
        sys.path[0] = parent
    else:
        sys.path.insert(0, parent)


if __name__ == "__main__":
    _package_parent_first()
    from evaluator.protocol import main
    sys.exit(main())
