"""The run path of ``evalkit run``: its settings (``config``), what it runs resolved once
(``plan``), its run directory opened (``open``), the parts each process builds
(``components``), the in-process runner (``execute``), and the checks and resumption
around them (``preflight``, ``resume``, ``warmup``). A replicated run drives the same plan
from ``evalkit.scale``."""
