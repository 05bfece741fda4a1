"""The folder `footprint run --count-steps` puts first on the child's PYTHONPATH (it holds a sitecustomize)."""
