"""Tally: a multi-tenant chat backend with rolling-window memory.

NumPy's BLAS would start a thread per core for the small matrix products of memory retrieval
(backend/retrieval), and they would fight the event loop and the other workers for the cores:
a search was several times slower than on one thread. BLAS reads the variable when NumPy first
loads, so it is set here, before any of Tally imports NumPy; an operator's own value wins.
"""

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
