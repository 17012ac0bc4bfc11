"""Running stores on the one day loop (``rbjax.day_loop``): ``rollout`` (the chunk driver: vmap over stores,
shard_map over devices; ``rollout_chunks`` for any number of stores; ``RolloutOptions``), ``rollout_programs``
(a rollout's compiled programs), ``continuation`` (a snapshot continued bit for bit), ``sweep``, ``paired`` (a policy
beside a reference from one snapshot), and the programs stored on disk (``executables``; the one holder of
compiled programs in memory is ``rbjax.programs``)."""
