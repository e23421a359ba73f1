"""rdmaprov: provision and prove RDMA GPU clusters."""

__version__ = "0.1.0"
