"""Many ranks: placement, collectives, the worker pool, the Parquet index. Imports read/ and model/."""
