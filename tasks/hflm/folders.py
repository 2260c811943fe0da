"""A folder built aside and put in place whole: readers see the old folder or the new one, never half of either."""

import contextlib
import os
import shutil
import tempfile


@contextlib.contextmanager
def built_aside(dest):
    """Yields an empty sibling folder of dest to build in; on success it replaces dest, on any error it is removed."""
    os.makedirs(os.path.dirname(os.path.abspath(dest)), exist_ok=True)
    build_dir = tempfile.mkdtemp(prefix=f".{os.path.basename(dest.rstrip('/'))}.building-", dir=os.path.dirname(os.path.abspath(dest)))
    try:
        yield build_dir
        # mkdtemp's 0700 would hide the folder from sandboxed readers running as another user (Docker's agent, uid 1000).
        os.chmod(build_dir, 0o755)
        old = dest.rstrip("/") + ".old"
        shutil.rmtree(old, ignore_errors=True)
        if os.path.exists(dest):
            os.rename(dest, old)  # the old folder goes only once the new one is whole
        os.rename(build_dir, dest)
        shutil.rmtree(old, ignore_errors=True)
    except BaseException:
        shutil.rmtree(build_dir, ignore_errors=True)
        raise
