"""Passes over CUDA Tile IR, a registry, and the pipeline table (see ``pipelines.py``)."""
