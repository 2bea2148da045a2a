"""The `sublet` console script of the installed package: runs the bundled
`sublet` command (sublet/_bin/sublet) with the same arguments."""

import os
import sys

from sublet import _loader


def main() -> int:
    exe = _loader.bundled_cli()
    if exe is None:
        sys.stderr.write("sublet: the bundled command is missing (install the package with "
                         "pip install .)\n")
        return 127
    os.execv(exe, [exe] + sys.argv[1:])
    return 127  # not reached


if __name__ == "__main__":
    sys.exit(main())
