"""RDMA discovery on the local host and across an inventory: the rdma_facts logic, NCCL
settings derived from it, an NCCL environment lint, and the fabric consistency check."""
