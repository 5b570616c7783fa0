"""Scale-out on Ray: replicas, the distributed cache build and the shared judge service."""
