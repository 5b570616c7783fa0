"""Data-parallel training on Ray: one FSDP2-sharded policy worker per GPU (or CPU slot).

- :mod:`.balance`: split a batch's rows across ranks, balanced by token count.
- :mod:`.fsdp`: ``fully_shard`` per vision block, the vision tower, per decoder layer,
  the policy last (the root); mixed precision on GPU.
- :mod:`.init`: how each rank gets the weights (all ranks read, or rank 0 reads and
  broadcasts into meta-initialised shards), gradient checkpointing, the reference.
- :mod:`.reference`: the frozen reference policy of a rank (KL).
- :mod:`.lockstep`: the counts every rank agrees on before collectives that depend on
  its rows (token-budget micro-batches, vision encoded once per prompt).
- :mod:`.worker`: what runs in each Ray actor (process group, policy, reference, optimizer
  and its lr schedule, steps).
- :mod:`.group`: the driver's side (start the workers, send each its rows, gather).
- :mod:`.rollout_worker`: colocated vLLM rollout engines inside the workers (weights synced
  in memory in the worker); :mod:`.colocate`: the driver's handle on them (prompt refs in,
  token ids out).

Ray is imported lazily: importing this package needs neither Ray nor a process group.
"""
