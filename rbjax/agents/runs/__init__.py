"""Runs: many stores played by agents over one batched engine (``loop``: the async day loop, ``Progress``),
run folders and their ``run.json`` (``folder``), rbjax policies through the tools (``policy``), language-model
agents with logs and checkpoints (``llm_agents``, ``checkpoints``) and stores taken over mid-episode
(``slices``).

Imports: everything below (``engine``, ``tools``, ``llm``) and ``rbjax.runners``."""
