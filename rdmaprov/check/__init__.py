"""The local pre-job node check behind ``rdmaprov check``.

probes (read the node) → judge (pure: state x expectations → items, one reason line) → output
(table, JSON, NHC line, Prometheus textfile). expect holds the expectations and their file.
"""
