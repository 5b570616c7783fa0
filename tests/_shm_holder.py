"""A stand-in for vLLM's engine core in the /dev/shm tests, run as ``python -c HOLDER NAME``.

What the engine core does: a message-queue segment (``psm_*``) it holds until it dies. A
SIGKILL'd process never unlinks it, and it is off the resource tracker (as vLLM's segments
left behind are), so nothing else does either; SIGTERM kills it at once (Python's default
action: no handler of its own runs). It prints ``ready`` once the segment exists.
"""

HOLDER = """
import sys, time
from multiprocessing import resource_tracker, shared_memory
seg = shared_memory.SharedMemory(name=sys.argv[1], create=True, size=1 << 16)
resource_tracker.unregister(seg._name, "shared_memory")
print("ready", flush=True)
while True:
    time.sleep(1)
"""
