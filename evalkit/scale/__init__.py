"""Scale-out on Ray: evaluation replicas fed by one driver (``evalkit run --replicas N``),
the distributed cache build (``evalkit cache build --ray``) and the shared judge service.

Ray is imported only by the modules that need it (``cluster``, ``replica``, ``driver``,
``cache_build``, ``judge_service``); the work queue (``queue``) and the cost estimates
(``cost``) are plain Python.
"""
