"""OmniForge script helper (stdlib only).

Installed into every tool environment by OmniForge, so a script can ``import omniforge``.

    import omniforge
    args = omniforge.args()                 # the tool call's arguments (a dict)
    omniforge.progress(1, 3, "fetching")    # progress notification
    omniforge.log("info", {"rows": 10})     # log message for the client
    omniforge.result(structured={"n": 1})   # structured result (besides stdout)
    answer = omniforge.request("sample", {...}, timeout=60)

The server talks to the script over a Unix socket whose descriptor number is in the
``OMNIFORGE_FD`` environment variable; both directions carry newline-delimited JSON-RPC 2.0.
Without ``OMNIFORGE_FD`` (a script run by hand), ``progress`` and ``log`` do nothing,
``result`` prints its JSON to stdout, and ``request`` raises ``RuntimeError``.
"""

import itertools
import json
import os
import socket
import sys
import threading

__all__ = ["args", "progress", "log", "result", "request", "RequestError"]

_LEVELS = ("debug", "info", "notice", "warning", "error", "critical", "alert", "emergency")


class RequestError(Exception):
    """The server answered a request with a JSON-RPC error."""

    def __init__(self, code, message, data=None):
        super().__init__("%s (code %s)" % (message, code))
        self.code = code
        self.message = message
        self.data = data


class _Channel:
    def __init__(self, fd):
        self.sock = socket.socket(fileno=fd)
        self.write_lock = threading.Lock()
        self.state_lock = threading.Lock()
        self.pending = {}  # id -> [threading.Event, response]
        self.ids = itertools.count(1)
        self.reader = None
        self.closed = False

    def send(self, message):
        data = (json.dumps(message, separators=(",", ":"), default=str) + "\n").encode()
        with self.write_lock:
            self.sock.sendall(data)

    def _read_loop(self):
        buf = b""
        try:
            while True:
                chunk = self.sock.recv(65536)
                if not chunk:
                    break
                buf += chunk
                while b"\n" in buf:
                    line, buf = buf.split(b"\n", 1)
                    if not line.strip():
                        continue
                    try:
                        msg = json.loads(line)
                    except ValueError:
                        continue
                    with self.state_lock:
                        waiter = self.pending.get(msg.get("id")) if isinstance(msg, dict) else None
                    if waiter is not None:
                        waiter[1] = msg
                        waiter[0].set()
        except OSError:
            pass
        with self.state_lock:
            self.closed = True
            for waiter in self.pending.values():
                waiter[0].set()

    def request(self, method, params, timeout):
        request_id = next(self.ids)
        waiter = [threading.Event(), None]
        with self.state_lock:
            if self.closed:
                raise RuntimeError("OmniForge side channel is closed")
            self.pending[request_id] = waiter
            if self.reader is None:
                self.reader = threading.Thread(target=self._read_loop, name="omniforge", daemon=True)
                self.reader.start()
        try:
            message = {"jsonrpc": "2.0", "id": request_id, "method": method}
            if params is not None:
                message["params"] = params
            self.send(message)
            if not waiter[0].wait(timeout):
                raise TimeoutError("no answer to %r within %s s" % (method, timeout))
        finally:
            with self.state_lock:
                self.pending.pop(request_id, None)
        response = waiter[1]
        if response is None:
            raise RuntimeError("OmniForge side channel closed before %r was answered" % method)
        if "error" in response:
            err = response["error"] or {}
            raise RequestError(err.get("code"), err.get("message", "error"), err.get("data"))
        return response.get("result")


def _open_channel():
    fd = os.environ.get("OMNIFORGE_FD")
    if not fd:
        return None
    try:
        return _Channel(int(fd))
    except (ValueError, OSError):
        return None


_channel = _open_channel()
_last_done = None
_args = None
_args_lock = threading.Lock()


def _notify(method, params):
    if _channel is None:
        return
    try:
        _channel.send({"jsonrpc": "2.0", "method": method, "params": params})
    except OSError:
        pass  # the server went away; a notification is not worth crashing the script


def args():
    """The call's arguments: the JSON object the server wrote to stdin (``{}`` when empty)."""
    global _args
    with _args_lock:
        if _args is None:
            data = sys.stdin.read()
            _args = json.loads(data) if data.strip() else {}
        return _args


def progress(done, total=None, message=None):
    """Reports progress. Values of ``done`` that do not increase are dropped."""
    global _last_done
    if _last_done is not None and done <= _last_done:
        return
    _last_done = done
    params = {"done": done}
    if total is not None:
        params["total"] = total
    if message is not None:
        params["message"] = str(message)
    _notify("progress", params)


def log(level, data):
    """Sends a log message (level: debug, info, notice, warning, error, critical, …)."""
    level = str(level).lower()
    if level not in _LEVELS:
        level = "info"
    _notify("log", {"level": level, "data": data})


def result(content=None, structured=None):
    """Sets the call's result: ``content`` (any JSON) and/or ``structured`` (a JSON object).

    Without a server connection, prints the result as JSON to stdout instead.
    """
    params = {}
    if content is not None:
        params["content"] = content
    if structured is not None:
        params["structured"] = structured
    if _channel is None:
        print(json.dumps(params, default=str))
        return
    _notify("result", params)


def request(method, params=None, timeout=60.0):
    """Sends a request to the server and waits up to ``timeout`` seconds for its answer.

    Raises ``RequestError`` for an error answer, ``TimeoutError`` when none came in time, and
    ``RuntimeError`` when there is no server connection.
    """
    if _channel is None:
        raise RuntimeError("not running under OmniForge (OMNIFORGE_FD is not set)")
    return _channel.request(method, params, timeout)
