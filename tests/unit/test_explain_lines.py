"""Line reading before any parser: launcher prefixes, control sequences, one-line tracebacks."""

from __future__ import annotations

import pytest

from rdmaprov.explain import explain_stream
from rdmaprov.parsers._common import clean, split_pasted

MSG = "host1:123:456 [0] NCCL INFO Using network Socket"


@pytest.mark.parametrize("prefix", [
    "3: ",                                   # srun --label
    "[1,0]<stdout>:",                        # Open MPI --tag-output
    "[0]<stderr>:",                          # Horovod
    "2024-05-01T10:00:00.123Z ",             # ISO timestamp
    "2024-05-01 10:00:00,123 | ",            # ISO timestamp and a pipe
    "[2025-10-16 22:16:08] ",
    "Dec  4 17:21:16 gpu01 trainer[4242]: ",  # syslog / journalctl
    "[Fri Dec  4 17:21:16 2026] ",           # dmesg -T
    "[  123.456789] ",                       # dmesg
    "[pod/trainer-0/main] ",                 # kubectl logs --prefix
    "trainer-worker-0 | ",                   # docker compose / stern
    "\x1b[32m",                              # a colour before the text
])
def test_prefixes_are_stripped(prefix: str) -> None:
    assert clean(prefix + MSG) == MSG


def test_nested_prefixes_and_trailing_colour_reset() -> None:
    assert clean("2024-05-01T10:00:00Z 0: " + MSG + "\x1b[0m\r\n") == MSG


def test_table_rows_and_tool_lines_are_not_prefixes() -> None:
    for line in ("     8             2     float     sum      -1    10.1    0.00    0.00      0",
                 "0/1: link mlx5_0/1 state ACTIVE physical_state LINK_UP",
                 "Using network IB | Using internal Network IB",
                 "\trx_prio3_pause: 12"):
        assert clean(line) == line


def test_one_line_traceback_is_cut_at_written_newlines() -> None:
    assert split_pasted("a\\nLast error:\\nNET/IB : x") == ["a", "Last error:", "NET/IB : x"]
    assert split_pasted("plain") == ["plain"]


def test_colour_reset_does_not_hide_a_socket_fallback() -> None:
    lines = ["h:1:2 [0] NCCL INFO NET/IB : No device found.\x1b[0m\n",
             "h:1:2 [0] NCCL INFO NET/Socket : Using [0]eth0:10.0.0.1<0>\x1b[0m\n",
             "h:1:2 [0] NCCL INFO Using network Socket\x1b[0m\n"]
    r = explain_stream(lines)
    assert r["network"] == "Socket" and r["fallback_to_socket"] is True
    assert r["oob_interface"] == "eth0"


def test_srun_labels_keep_an_nccl_tests_table() -> None:
    lines = ["0: #       size         count      type   redop    root     time   algbw   busbw "
             "#wrong     time   algbw   busbw #wrong",
             "0:    1048576        262144     float     sum      -1   100.0   10.49   19.66"
             "      0    99.0   10.59   19.86      0",
             "0: # Avg bus bandwidth    : 19.7"]
    r = explain_stream(lines)
    assert r["kind"] == "nccl_tests"
    assert r["peak_busbw"] == 19.86 and r["avg_busbw"] == 19.7


def test_one_line_pasted_exception_keeps_its_last_error() -> None:
    line = ("1: RuntimeError: NCCL error in: ProcessGroupNCCL.cpp:1275, unhandled system error, "
            "NCCL version 2.18.1\\nncclSystemError: System call failed. \\nLast error:\\n"
            "NET/IB : Got completion from peer 10.0.0.2<54321> with error 12, opcode 0, len 0, "
            "vendor err 129 (Send)")
    r = explain_stream([line])
    kinds = [e["kind"] for e in r["errors"]]
    assert "completion" in kinds
    assert r["errors"][kinds.index("completion")]["status"] == 12


def test_flattened_exception_with_version_keeps_its_last_error() -> None:
    line = ("[rank3]: torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:"
            "1970, unhandled system error (run with NCCL_DEBUG=INFO for details), NCCL version "
            "2.20.5 ncclSystemError: System call failed.  Last error: NET/IB : Got completion "
            "from peer 10.1.1.2<40251> with status=12 opcode=0 len=0 vendor err 129 (Send)")
    r = explain_stream([line])
    kinds = [e["kind"] for e in r["errors"]]
    assert "completion" in kinds and "system_error" in kinds
    assert r["findings"][0]["message"].startswith("work completion error status 12")
