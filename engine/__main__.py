"""``python -m engine``: see engine.cli."""

import logging
import sys

from engine.cli import main

# bitsandbytes warns on every import, on CPUs with AVX512-BF16, that the optional `kernels` package (which would
# fetch a faster 4-bit CPU kernel from the hub) is missing; its own kernel runs instead. Every train.log began
# with that line: keep its errors, not the notice.
logging.getLogger("bitsandbytes.backends.cpu.ops").setLevel(logging.ERROR)

sys.exit(main())
