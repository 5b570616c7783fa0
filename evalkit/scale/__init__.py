"""Scale-out on Ray: evaluation replicas fed by one driver (``evalkit run --replicas N``).

Ray is imported only by the modules that need it (``replica``, ``driver``); the work
queue (``queue``) and the cost estimates (``cost``) are plain Python.
"""
