"""Hardware as data: the shipped TOML catalog of GPUs, links and nodes, and its loader."""

from traincast.hardware.catalog import GPU, Catalog, CatalogError, Link, Node, load_catalog

__all__ = ["GPU", "Catalog", "CatalogError", "Link", "Node", "load_catalog"]
