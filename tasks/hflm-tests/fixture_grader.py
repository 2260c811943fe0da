"""A full-tier grader entry's main, run in the test's own process as `python ENTRY ARGS` would end.

    status, stderr = fixture_grader.run_main(GRADER, argv, environ={"A2RL_SEARCH_SOCKET": None})

For the runs of a task's suite that stop before grading (a refused checkpoint, assets to prepare again, a GPU it
cannot use, a failed search): each would otherwise pay an interpreter and a torch import of its own. The grading
itself still runs in a fresh .venv-full Python, as the server runs it, in each suite.
"""

import contextlib
import importlib.util
import io
import os
import sys
import traceback
from unittest import mock


def load(entry):
    """The grader entry (a path) as a module, under a name of its own."""
    name = "grader_" + os.path.basename(os.path.dirname(os.path.dirname(entry))).replace("-", "_")
    spec = importlib.util.spec_from_file_location(name, entry)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def run_main(entry, argv, environ=None):
    """(exit status, stderr) of load(entry).main(argv), with os.environ updated by environ (None removes a variable)
    for the run: a returned status or sys.exit(status); sys.exit(message) writes the message and is status 1, as is an
    uncaught error, whose traceback is written."""
    changed = {k: v for k, v in (environ or {}).items() if v is not None}
    removed = [k for k, v in (environ or {}).items() if v is None]
    stderr = io.StringIO()
    with mock.patch.dict(os.environ, changed), contextlib.redirect_stderr(stderr):
        for key in removed:
            os.environ.pop(key, None)
        try:
            status = load(entry).main(argv)
        except SystemExit as e:
            status = 0 if e.code is None else e.code if isinstance(e.code, int) else 1
            if isinstance(e.code, str):
                print(e.code, file=sys.stderr)
        except Exception:
            traceback.print_exc()
            status = 1
    return status, stderr.getvalue()
