"""The local model's server process: llama.cpp's own OpenAI-compatible HTTP server, as the
``xllamacpp`` wheel embeds it (a prebuilt CPU build: nothing compiles at install), serving one GGUF
file on 127.0.0.1 until it is sent SIGTERM or SIGINT.

``python -m webfreeze.llm.local_server --model PATH --alias ID --port N --n-ctx N --threads N``.
:class:`webfreeze.llm.local.LocalModelServer` starts it and waits for ``GET /v1/models``. Every
setting that can change a reply is set here, none is left to the environment; the server loads
nothing from the network (``offline``) and serves no web page of its own (``ui``). A failure to
start is one line on stderr and exit status 1 (a taken port says "address already in use", which
the starter answers with another port).
"""

from __future__ import annotations

import argparse
import errno
import signal
import socket
import sys
import threading

# llama.cpp keeps recent prompts' KV state in memory to reuse their prefixes (its default is 8 GiB);
# the 135M model's state for a whole 4,096-token context is under 100 MB.
PROMPT_CACHE_MIB = 256


def _port_taken(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError as exc:
            return exc.errno == errno.EADDRINUSE
    return False


def _params(xlc, args):
    p = xlc.CommonParams()
    p.model.path = args.model
    p.model_alias = {args.alias}
    p.hostnames = ["127.0.0.1"]
    p.port = args.port
    p.n_ctx = args.n_ctx
    p.n_parallel = 1  # one slot: requests are answered one after another, as llama-cpp-python's server did
    p.cpuparams.n_threads = args.threads
    p.cpuparams_batch.n_threads = args.threads
    p.sampling.seed = 0  # (what a request that samples gets when it sends no seed)
    p.reasoning_format = xlc.common_reasoning_format.COMMON_REASONING_FORMAT_NONE  # replies verbatim
    p.cache_ram_mib = PROMPT_CACHE_MIB
    p.offline = True
    p.ui = False
    p.models_autoload = False
    return p


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m webfreeze.llm.local_server",
                                     description="Serve a GGUF model with llama.cpp's server on 127.0.0.1.")
    parser.add_argument("--model", required=True, help="the GGUF file")
    parser.add_argument("--alias", required=True, help="the model id the server answers to")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--n-ctx", type=int, default=4096, help="context length in tokens")
    parser.add_argument("--threads", type=int, default=1, help="llama.cpp threads (prompt and generation)")
    args = parser.parse_args(argv)
    try:
        import xllamacpp as xlc
    except ImportError:
        print("xllamacpp is not installed: pip install 'webfreeze[local-llm]'", file=sys.stderr)
        return 1
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    try:
        server = xlc.Server(_params(xlc, args))
    except (RuntimeError, ValueError, OSError) as exc:
        why = f"127.0.0.1:{args.port}: address already in use" if _port_taken(args.port) else str(exc)
        print(f"the local model server did not start: {why}", file=sys.stderr, flush=True)
        return 1
    print(f"serving {args.alias} at {server.listening_address}", file=sys.stderr, flush=True)
    while not stop.wait(3600):
        pass
    del server  # (its destructor stops the HTTP server and frees the model)
    return 0


if __name__ == "__main__":
    sys.exit(main())
