"""Serves a local GGUF model over an OpenAI-compatible HTTP API (llama.cpp via xllamacpp).

    .deps/llama/bin/python scripts/model_server.py --model .deps/models/NAME.gguf [--port 0]

Listens on 127.0.0.1 only. Prints one line `model-server: listening on http://HOST:PORT` once
the model is loaded (tests and scripts parse it), then serves until killed. Sampling defaults to
temperature 0 with a fixed seed, so the same request gives the same answer.
"""

import argparse
import signal
import sys
import time

import xllamacpp


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--model", required=True)
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--ctx", type=int, default=8192)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--parallel", type=int, default=1)
    parser.add_argument("--seed", type=int, default=42)
    args = parser.parse_args()

    params = xllamacpp.CommonParams()
    params.model.path = args.model
    params.hostnames = ["127.0.0.1"]
    params.port = args.port
    params.n_ctx = args.ctx
    params.n_parallel = args.parallel
    params.cpuparams.n_threads = args.threads
    params.cpuparams_batch.n_threads = args.threads
    params.sampling.temp = 0.0
    params.sampling.seed = args.seed
    server = xllamacpp.Server(params)
    print(f"model-server: listening on {server.listening_address}", flush=True)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    while True:
        time.sleep(3600)


if __name__ == "__main__":
    sys.exit(main())
