#!/usr/bin/env python3
"""A distributed factory's validation spread over two torchrun "nodes" on the loopback address (USER_MODEL.md,
"Several machines"): node 1 is a loop of `torchrun --nnodes 2 --node-rank 1 ... user_model.py --join`, one per run
ckptcheck makes, each joining node 0's static rendezvous at 127.0.0.1:PORT (a free port); node 0 is `ckptcheck
validate --adapter torch:module=...,nnodes=2,rdzv_endpoint=127.0.0.1:PORT`, checked by check_user_model.py.

  check_two_nodes.py --ranks-per-node K [check_user_model.py expectations] -- CKPTCHECK validate ARGS...
  check_two_nodes.py --occupied [check_user_model.py expectations] -- CKPTCHECK validate ARGS...

`{port}` in ARGS is replaced by the port. The loop is bounded (at most 40 joins) and stopped when validate ends.
--occupied: no node 1; the port is held by a listening socket of this script, so node 0's rendezvous cannot bind."""

import os
import signal
import socket
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from check_validate import adapter_python  # noqa: E402

DRIVER = os.path.join(HERE, "..", "..", "harness", "user_model", "torch", "user_model.py")
MAX_JOINS = 40


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def occupied(rest):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(1)
        port = s.getsockname()[1]
        rest = [a.replace("{port}", str(port)) for a in rest]
        return subprocess.call([sys.executable, os.path.join(HERE, "check_user_model.py")] + rest)


def main(argv):
    if argv[:1] == ["--occupied"]:
        return occupied(argv[1:])
    k = argv.index("--ranks-per-node")
    per_node = argv[k + 1]
    rest = argv[:k] + argv[k + 2 :]
    port = free_port()
    rest = [a.replace("{port}", str(port)) for a in rest]
    node1 = [
        adapter_python(),
        "-m",
        "torch.distributed.run",
        "--nnodes",
        "2",
        "--node-rank",
        "1",
        "--nproc-per-node",
        per_node,
        "--rdzv-backend",
        "static",
        "--rdzv-endpoint",
        "127.0.0.1:%d" % port,
        "--max-restarts",
        "0",
        DRIVER,
        "--join",
    ]
    log = open(os.environ.get("CKPT_NODE1_LOG", os.devnull), "w")
    check = subprocess.Popen([sys.executable, os.path.join(HERE, "check_user_model.py")] + rest)
    joins, current = 0, None
    try:
        while check.poll() is None and joins < MAX_JOINS:
            if current is None or current.poll() is not None:
                current = subprocess.Popen(
                    node1, stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True
                )
                joins += 1
            time.sleep(0.2)
        code = check.wait()
    finally:
        if current is not None and current.poll() is None:
            os.killpg(current.pid, signal.SIGTERM)
            current.wait()
    print("node 1: %d torchrun joins on 127.0.0.1:%d" % (joins, port))
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
