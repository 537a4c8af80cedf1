#!/usr/bin/env python3
"""A development server for the dashboard's static files, in front of a running cairn.

It serves the files the way `cairn serve` will: assets/index.html at `/`, every other file of
assets/ at `/ui/<name>`, with the same Content-Security-Policy, and proxies everything under
`/v1/` to cairn (streaming, so Server-Sent Events arrive as they are sent). It lets the
dashboard be worked on and tested before, or without, a Rust build that embeds it.

    python3 tests/browser/devserver.py --cairn http://127.0.0.1:8080 --port 8099

Python standard library only.
"""

import argparse
import http.client
import http.server
import mimetypes
import os
import sys
import urllib.parse

ASSETS = os.path.normpath(os.path.join(
    os.path.dirname(os.path.abspath(__file__)),
    "..", "..", "crates", "cairn", "src", "http", "dashboard", "assets"))

# The policy the Rust side will send with the dashboard: the test catches anything that breaks it.
CSP = ("default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
       "connect-src 'self'")

TYPES = {".js": "text/javascript; charset=utf-8", ".css": "text/css; charset=utf-8",
         ".html": "text/html; charset=utf-8", ".svg": "image/svg+xml", ".md": "text/plain; charset=utf-8"}

# Headers that describe one connection, not the message (RFC 9110 section 7.6.1).
HOP_BY_HOP = {"connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "te",
              "trailer", "transfer-encoding", "upgrade", "host", "content-length"}


class Handler(http.server.BaseHTTPRequestHandler):
    # HTTP/1.0 answers: every response ends when the connection closes, which suits a stream of
    # unknown length and keeps the proxy free of chunked encoding.
    protocol_version = "HTTP/1.0"
    upstream = None  # (host, port), set in main

    def log_message(self, fmt, *args):
        if os.environ.get("DEVSERVER_QUIET") != "1":
            sys.stderr.write("devserver: " + (fmt % args) + "\n")

    def do_GET(self):
        self.route()

    def do_POST(self):
        self.route()

    def do_PUT(self):
        self.route()

    def route(self):
        path = urllib.parse.urlsplit(self.path).path
        if path.startswith("/v1/"):
            return self.proxy()
        if self.command != "GET":
            return self.plain(405, "method not allowed")
        if path == "/":
            return self.asset("index.html")
        if path.startswith("/ui/"):
            name = path[len("/ui/"):]
            # Flat names only, as the Rust side serves them: no folders, no way out of assets/.
            if name and "/" not in name and "\\" not in name and not name.startswith("."):
                return self.asset(name)
        return self.plain(404, "not found")

    def plain(self, status, text):
        body = text.encode()
        self.send_response(status)
        self.send_header("content-type", "text/plain; charset=utf-8")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def asset(self, name):
        file = os.path.join(ASSETS, name)
        if not os.path.isfile(file):
            return self.plain(404, "not found")
        with open(file, "rb") as f:
            body = f.read()
        ext = os.path.splitext(name)[1]
        self.send_response(200)
        self.send_header("content-type", TYPES.get(ext) or mimetypes.guess_type(name)[0] or "application/octet-stream")
        self.send_header("content-length", str(len(body)))
        self.send_header("content-security-policy", CSP)
        self.send_header("x-content-type-options", "nosniff")
        self.send_header("cache-control", "no-store")
        self.end_headers()
        self.wfile.write(body)

    def proxy(self):
        length = int(self.headers.get("content-length") or 0)
        body = self.rfile.read(length) if length else None
        headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP_BY_HOP}
        host, port = self.upstream
        conn = http.client.HTTPConnection(host, port, timeout=600)
        try:
            conn.request(self.command, self.path, body=body, headers=headers)
            resp = conn.getresponse()
        except OSError as err:
            return self.plain(502, f"cairn at {host}:{port} could not be reached: {err}")
        self.send_response(resp.status, resp.reason)
        for k, v in resp.getheaders():
            if k.lower() not in HOP_BY_HOP:
                self.send_header(k, v)
        self.end_headers()
        try:
            # read1 hands over whatever has arrived, so each event is forwarded as it comes.
            while True:
                chunk = resp.read1(65536)
                if not chunk:
                    break
                self.wfile.write(chunk)
                self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            pass  # the browser closed the stream (page left, or EventSource closed)
        finally:
            conn.close()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cairn", default=os.environ.get("CAIRN_UPSTREAM", "http://127.0.0.1:8080"),
                        help="the cairn server's base URL")
    parser.add_argument("--port", type=int, default=8099)
    parser.add_argument("--host", default="127.0.0.1")
    args = parser.parse_args()
    up = urllib.parse.urlsplit(args.cairn)
    Handler.upstream = (up.hostname, up.port or 80)
    server = http.server.ThreadingHTTPServer((args.host, args.port), Handler)
    server.daemon_threads = True
    print(f"devserver: http://{args.host}:{server.server_port}/ -> {args.cairn}", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
