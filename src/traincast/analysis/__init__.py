"""Cluster-level analyses over a job table, each on the one model core: ``characterize`` (where
the time goes), ``whatif`` (scenarios), ``recommend`` (the best architecture and node per job),
``study`` (the paper's method end to end) and ``colocate`` (GPU sharing)."""
