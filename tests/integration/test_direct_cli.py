"""The CLI's direct-mode flags: --nodes-per-region and --direct-ports are validated with one
readable line and exit 2, and a served account lists its nodes (free ports with --port 0) in
the ready line, in as many regions as it has, with a direct request answered on one of them."""
import asyncio
import subprocess
import sys

import pytest

from regionlab.client.protocol import direct as D
from test_cli import EXIT_TIMEOUT_S, _clean_env, spawn


@pytest.mark.parametrize("flags,message", [
    (["--nodes-per-region", "3"], "--nodes-per-region '3': must be an integer from 4 to"),
    (["--direct-ports", "20000-10000"], "--direct-ports '20000-10000': must be MIN-MAX"),
    (["--direct-ports", "ten"], "--direct-ports 'ten': must be MIN-MAX"),
    (["--direct-ports", "10000-10003"], "need 12"),
])
def test_bad_direct_flags_are_refused_with_a_clear_message(flags, message):
    proc = subprocess.run([sys.executable, "-m", "regionlab.emulator", "--port", "0", "--control-port", "0", *flags],
                          capture_output=True, text=True, timeout=EXIT_TIMEOUT_S, env=_clean_env())
    assert proc.returncode == 2 and message in proc.stderr and "Traceback" not in proc.stderr


def test_the_ready_line_lists_every_node_and_a_node_answers_the_handshake(tmp_path):
    with spawn(tmp_path, "--port", "0", "--control-port", "0", "--nodes-per-region", "5") as cli:
        nodes = cli.info["direct"]["nodes"]
        assert cli.info["direct"]["protocol"] == D.PROTOCOL
        assert len(nodes) == 15 and len({n["port"] for n in nodes}) == 15 and all(n["port"] for n in nodes)

        async def hello():
            reader, writer = await asyncio.open_connection("127.0.0.1", nodes[0]["port"])
            writer.write(D.encode(D.hello()))
            frames = []
            decoder = D.FrameDecoder()
            while not frames:
                frames = decoder.feed(await reader.read(65536))
            writer.close()
            return frames[0]
        challenge = asyncio.run(hello())
        assert challenge["t"] == "challenge" and challenge["region"] == nodes[0]["region"]
