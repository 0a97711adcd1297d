"""Engines that evaluate what-if scenarios over job tables: ``local`` (this process,
vectorized numpy) and ``dask`` (Parquet partitions on a Dask cluster), with identical results.
"""

ENGINES = ("local", "dask")
