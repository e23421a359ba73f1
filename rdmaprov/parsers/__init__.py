"""Parsers for the text users paste: NCCL logs, nccl-tests tables and RDMA tool output.

One module per format, each with a streaming ``*Parser`` class (``feed(line)``,
``finish()``); the NCCL log also has ``parse_nccl_log(lines)``. ``rdmaprov.explain`` detects
the format and runs the right one; the validation engine uses ``nccl_log`` directly.
"""

from rdmaprov.parsers._common import Finding, Port
from rdmaprov.parsers.nccl_log import NcclLogParser, NcclLogReport, parse_nccl_log

__all__ = ["Finding", "NcclLogParser", "NcclLogReport", "Port", "parse_nccl_log"]
