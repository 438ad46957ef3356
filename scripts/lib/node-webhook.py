#!/usr/bin/env python3
"""The test node's stand-in for a pod network (scripts/node.sh).

The node has no pod network: a Pod reaches the API server and is probed by
kubelet only on the host's network, and everything must stay on loopback.
This mutating admission webhook (HTTPS on 127.0.0.1) changes each Pod at
creation so that it runs there unchanged otherwise:

- spec.hostNetwork: true;
- KUBERNETES_SERVICE_HOST=127.0.0.1 and KUBERNETES_SERVICE_PORT=<the API
  server's port> in every container's env (what kubelet sets from the
  `kubernetes` Service would point at a cluster IP nothing routes);
- every port the Pod uses (its containerPorts and numeric probe ports) is
  given a free port on 127.0.0.1: the containerPort and numeric probe ports
  change, and `:PORT` in args, command, lifecycle hooks' exec commands and
  env values becomes
  `127.0.0.1:FREE` (so `--listen=:8090` listens on loopback only, and two
  replicas do not collide on this one node). The mapping is recorded in
  the annotation node.opstatus.test/ports ("8090=41234,8081=40111").

Bounded, and never blocked by one client: the listening socket only
accepts; each connection gets a thread of its own (at most MAX_CONNECTIONS
at once, more are closed at once) that does the TLS handshake within
HANDSHAKE_SECONDS and reads the request within IO_SECONDS. An idle TCP
client (a port scan, a stuck peer) therefore holds one thread for a few
seconds, never the accept loop: with `failurePolicy: Fail` a blocked
webhook would fail every Pod create. Requests over 4 MiB are refused.
"""

import argparse
import base64
import copy
import json
import re
import socket
import ssl
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

ANNOTATION = "node.opstatus.test/ports"
MAX_BODY = 4 * 1024 * 1024
# The API server's own timeout for this webhook is 10 s (node.sh).
MAX_CONNECTIONS = 64
HANDSHAKE_SECONDS = 5
IO_SECONDS = 10
_given = set()
_lock = threading.Lock()


def free_port():
    """A port free on 127.0.0.1 and not handed out before by this webhook."""
    with _lock:
        for _ in range(100):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
            s.close()
            if port not in _given:
                _given.add(port)
                return port
    raise RuntimeError("no free port")


def containers(spec):
    return spec.get("containers", []) + spec.get("initContainers", [])


PROBES = ("readinessProbe", "livenessProbe", "startupProbe")


def ports_used(spec):
    used = set()
    for c in containers(spec):
        for p in c.get("ports", []):
            used.add(int(p["containerPort"]))
        for probe in PROBES:
            for kind in ("httpGet", "tcpSocket"):
                port = c.get(probe, {}).get(kind, {}).get("port")
                if isinstance(port, int):
                    used.add(port)
    return used


def rewrite_text(text, mapping):
    for old, new in mapping.items():
        pattern = r"(?<![\w.\]])((?:0\.0\.0\.0|127\.0\.0\.1|localhost|\[::\])?):%d(?!\d)" % old
        text = re.sub(pattern, "127.0.0.1:%d" % new, text)
    return text


def mutate(pod, apiserver_port):
    spec = copy.deepcopy(pod.get("spec", {}))
    mapping = {port: free_port() for port in sorted(ports_used(spec))}
    for c in containers(spec):
        for p in c.get("ports", []):
            p["containerPort"] = mapping[int(p["containerPort"])]
            p.pop("hostPort", None)
        for probe in PROBES:
            for kind in ("httpGet", "tcpSocket"):
                handler = c.get(probe, {}).get(kind)
                if handler and isinstance(handler.get("port"), int):
                    handler["port"] = mapping[handler["port"]]
        for key in ("args", "command"):
            if key in c:
                c[key] = [rewrite_text(a, mapping) for a in c[key]]
        for hook in (c.get("lifecycle") or {}).values():
            if "exec" in hook:
                hook["exec"]["command"] = [rewrite_text(a, mapping) for a in hook["exec"].get("command", [])]
        env = c.setdefault("env", [])
        for e in env:
            if "value" in e:
                e["value"] = rewrite_text(e["value"], mapping)
        names = {e["name"] for e in env}
        for name, value in (("KUBERNETES_SERVICE_HOST", "127.0.0.1"),
                            ("KUBERNETES_SERVICE_PORT", str(apiserver_port))):
            if name not in names:
                env.append({"name": name, "value": value})
    annotations = dict(pod.get("metadata", {}).get("annotations") or {})
    annotations[ANNOTATION] = ",".join("%d=%d" % kv for kv in sorted(mapping.items()))
    patch = [
        {"op": "add", "path": "/spec/hostNetwork", "value": True},
        {"op": "replace", "path": "/spec/containers", "value": spec["containers"]},
        {"op": "add", "path": "/metadata/annotations", "value": annotations},
    ]
    if "initContainers" in spec:
        patch.append({"op": "replace", "path": "/spec/initContainers", "value": spec["initContainers"]})
    return patch, mapping


class Handler(BaseHTTPRequestHandler):
    apiserver_port = 0
    # Each read and write on the connection (StreamRequestHandler.setup).
    timeout = IO_SECONDS

    def log_message(self, fmt, *args):
        sys.stderr.write("webhook: " + (fmt % args) + "\n")

    def do_GET(self):
        self.send_response(200 if self.path == "/healthz" else 404)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_POST(self):
        try:
            length = int(self.headers.get("Content-Length") or 0)
        except ValueError:
            length = -1
        if self.path.split("?")[0] != "/mutate" or not 0 <= length <= MAX_BODY:
            self.send_response(400)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        review = json.loads(self.rfile.read(length))
        request = review["request"]
        response = {"uid": request["uid"], "allowed": True}
        pod = request.get("object") or {}
        if request.get("kind", {}).get("kind") == "Pod":
            patch, mapping = mutate(pod, self.apiserver_port)
            response["patchType"] = "JSONPatch"
            response["patch"] = base64.b64encode(json.dumps(patch).encode()).decode()
            name = pod.get("metadata", {}).get("name") or pod.get("metadata", {}).get("generateName", "")
            sys.stderr.write("webhook: %s/%s ports %s\n" % (request.get("namespace"), name, mapping))
        body = json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                           "response": response}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


class Server(ThreadingHTTPServer):
    """Accepts plain TCP; the TLS handshake happens on the connection's own
    thread, under a deadline, so the accept loop never waits on a client."""

    def __init__(self, address, handler, context):
        super().__init__(address, handler)
        self.context = context
        self.slots = threading.BoundedSemaphore(MAX_CONNECTIONS)

    def process_request(self, request, client_address):
        if not self.slots.acquire(blocking=False):
            sys.stderr.write("webhook: %d connections open: closing one from %s\n"
                             % (MAX_CONNECTIONS, client_address[0]))
            self.shutdown_request(request)
            return
        try:
            super().process_request(request, client_address)
        except Exception:
            self.slots.release()
            raise

    def process_request_thread(self, request, client_address):
        try:
            tls = self.handshake(request)
            if tls is not None:
                super().process_request_thread(tls, client_address)
        finally:
            self.slots.release()

    def handshake(self, request):
        """The TLS connection, or None (closed) when the handshake failed or
        took longer than HANDSHAKE_SECONDS in all (a timer shuts the socket
        down, so a client that trickles bytes cannot stretch it)."""
        request.settimeout(HANDSHAKE_SECONDS)
        timer = threading.Timer(HANDSHAKE_SECONDS, _shut, (request,))
        timer.daemon = True
        timer.start()
        try:
            return self.context.wrap_socket(request, server_side=True)
        except (OSError, ValueError) as e:
            sys.stderr.write("webhook: handshake failed: %s\n" % e)
            self.shutdown_request(request)
            return None
        finally:
            timer.cancel()


def _shut(sock):
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--cert", required=True)
    parser.add_argument("--key", required=True)
    parser.add_argument("--apiserver-port", type=int, required=True)
    args = parser.parse_args()
    Handler.apiserver_port = args.apiserver_port
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(args.cert, args.key)
    server = Server(("127.0.0.1", args.port), Handler, context)
    server.serve_forever()


if __name__ == "__main__":
    main()
