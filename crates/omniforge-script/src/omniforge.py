"""OmniForge script helper (stdlib only).

Installed into every tool environment by OmniForge, so a script can ``import omniforge``.

    import omniforge
    args = omniforge.args()                 # the tool call's arguments (a dict)
    omniforge.progress(1, 3, "fetching")    # progress notification
    omniforge.log("info", {"rows": 10})     # log message for the client
    omniforge.result(content=[omniforge.text("hi"), omniforge.image(png_bytes, "image/png")],
                     structured={"n": 1})   # the call's result (instead of stdout)
    reply = omniforge.sample("Summarise: ...", max_tokens=200)   # sampling/createMessage
    answer = omniforge.elicit("Your name?", {"type": "object", "properties": {...}})
    folders = omniforge.roots()             # roots/list
    answers = omniforge.ask({"name": omniforge.elicit_request("Name?", schema),
                             "where": omniforge.roots_request()})  # several in one round
    caps = omniforge.client_capabilities()  # what the calling client declared
    omniforge.call_builtin("omniforge_get_tool", {"name": "x"})  # declared in its PEP 723 block
    omniforge.protocol_error(-32021, "needs sampling", {"requiredCapabilities": {"sampling": {}}})
    omniforge.start_task()                  # taskStart "script": the call becomes its task now

Content builders (``text``, ``image``, ``audio``, ``resource``, ``resource_link``) return MCP
content items as dicts; bytes are base64-encoded for you.

``sample``, ``elicit`` and ``roots`` are questions to the MCP client that called the tool, and
``ask`` puts several in one round: each returns the client's answer, or raises ``RequestError``
(e.g. when the client did not declare the capability) or ``TimeoutError``. Every question has a
key (``key=``, default ``q1``, ``q2``, … in asking order). Under protocol revision 2026-07-28 a
question ends the call with an input-required result (its key names it in ``inputRequests``);
the client's retry runs the script again from the start and answers its questions from the
client's ``inputResponses``: ask before doing anything with side effects.

The server talks to the script over a Unix socket whose descriptor number is in the
``OMNIFORGE_FD`` environment variable; both directions carry newline-delimited JSON-RPC 2.0.
Without ``OMNIFORGE_FD`` (a script run by hand), ``progress`` and ``log`` do nothing,
``result`` prints its JSON to stdout, and requests raise ``RuntimeError``.
"""

import base64
import binascii
import itertools
import json
import os
import socket
import sys
import threading

__all__ = [
    "args",
    "progress",
    "log",
    "result",
    "text",
    "image",
    "audio",
    "resource",
    "resource_link",
    "sample",
    "elicit",
    "roots",
    "ask",
    "sample_request",
    "elicit_request",
    "roots_request",
    "close_sse_stream",
    "client_capabilities",
    "protocol_error",
    "start_task",
    "call_builtin",
    "request",
    "RequestError",
]

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


def result(content=None, structured=None, is_error=False):
    """Sets the call's result: ``content`` and/or ``structured`` (a JSON object).

    ``content``: a list of MCP content items (build them with ``text``, ``image``, ``audio``,
    ``resource``, ``resource_link``), one item, or a str (one text item). An item that is not
    valid MCP content makes the call an error result that names it. ``structured`` becomes
    ``structuredContent`` (checked against the tool's outputSchema). ``is_error=True`` makes
    it a tool-level error result (MCP ``isError``) with exactly this content. Given twice, the
    last call wins. Without a server connection, prints the result as JSON to stdout instead.
    """
    params = {}
    if is_error:
        params["is_error"] = True
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


# --- content builders -------------------------------------------------------------------


def _base64(data, what):
    """``data`` as base64 text: bytes are encoded, a str must already be valid base64."""
    if isinstance(data, (bytes, bytearray, memoryview)):
        return base64.b64encode(bytes(data)).decode("ascii")
    if isinstance(data, str):
        try:
            base64.b64decode(data, validate=True)
        except (binascii.Error, ValueError):
            raise ValueError("%s: a str must be base64 text (pass bytes to have it encoded)" % what)
        return data
    raise TypeError("%s: expected bytes or base64 str, got %s" % (what, type(data).__name__))


def _with_extras(item, annotations, meta):
    if annotations is not None:
        item["annotations"] = annotations
    if meta is not None:
        item["_meta"] = meta
    return item


def text(s, annotations=None, meta=None):
    """A text content item: ``{"type": "text", "text": s}``."""
    return _with_extras({"type": "text", "text": str(s)}, annotations, meta)


def image(data, mime_type, annotations=None, meta=None):
    """An image content item. ``data``: the image bytes, or base64 text; ``mime_type``: e.g.
    ``"image/png"``."""
    item = {"type": "image", "data": _base64(data, "image"), "mimeType": str(mime_type)}
    return _with_extras(item, annotations, meta)


def audio(data, mime_type, annotations=None, meta=None):
    """An audio content item. ``data``: the audio bytes, or base64 text; ``mime_type``: e.g.
    ``"audio/wav"``."""
    item = {"type": "audio", "data": _base64(data, "audio"), "mimeType": str(mime_type)}
    return _with_extras(item, annotations, meta)


def resource(uri, text=None, blob=None, mime_type=None, annotations=None, meta=None):
    """An embedded resource content item. Give exactly one of ``text`` (a str) or ``blob`` (bytes,
    or base64 text)."""
    if (text is None) == (blob is None):
        raise ValueError("resource: give exactly one of text= or blob=")
    contents = {"uri": str(uri)}
    if mime_type is not None:
        contents["mimeType"] = str(mime_type)
    if text is not None:
        contents["text"] = str(text)
    else:
        contents["blob"] = _base64(blob, "resource blob")
    return _with_extras({"type": "resource", "resource": contents}, annotations, meta)


def resource_link(uri, name, title=None, description=None, mime_type=None, size=None,
                  annotations=None, meta=None):
    """A resource link content item: a pointer the client may read with resources/read."""
    item = {"type": "resource_link", "uri": str(uri), "name": str(name)}
    if title is not None:
        item["title"] = str(title)
    if description is not None:
        item["description"] = str(description)
    if mime_type is not None:
        item["mimeType"] = str(mime_type)
    if size is not None:
        item["size"] = int(size)
    return _with_extras(item, annotations, meta)


# --- requests to the MCP client -----------------------------------------------------------

_SAMPLE_KEYS = {
    "system_prompt": "systemPrompt",
    "stop_sequences": "stopSequences",
    "model_preferences": "modelPreferences",
    "include_context": "includeContext",
}


_key_numbers = itertools.count(1)
_key_lock = threading.Lock()


def _default_key():
    """``q1``, ``q2``, … in the order the script asks its unnamed questions."""
    with _key_lock:
        return "q%d" % next(_key_numbers)


def sample_request(messages_or_prompt, max_tokens=1024, **kw):
    """A ``sampling/createMessage`` question for ``ask`` (``sample``'s arguments)."""
    if isinstance(messages_or_prompt, str):
        items = [messages_or_prompt]
    else:
        items = list(messages_or_prompt)
    messages = []
    for item in items:
        if isinstance(item, str):
            item = {"role": "user", "content": {"type": "text", "text": item}}
        messages.append(item)
    body = {"messages": messages, "maxTokens": int(max_tokens)}
    for key, value in kw.items():
        body[_SAMPLE_KEYS.get(key, key)] = value
    return {"method": "sampling/createMessage", "params": body}


def elicit_request(message, requested_schema):
    """An ``elicitation/create`` question (form mode) for ``ask``."""
    body = {"message": str(message), "requestedSchema": requested_schema}
    return {"method": "elicitation/create", "params": body}


def roots_request():
    """A ``roots/list`` question for ``ask``."""
    return {"method": "roots/list", "params": {}}


def ask(requests, timeout=None):
    """Asks the client several questions in one round and returns their answers by key.

    ``requests``: a dict of key → question, the questions built with ``elicit_request``,
    ``sample_request`` and ``roots_request``. Keys name the questions for the client (MCP
    ``inputRequests`` keys under protocol revision 2026-07-28); use each key once per call.

    Returns a dict of key → the client's result (as ``elicit``, ``sample`` and ``roots/list``
    answer it). Raises ``RequestError`` when the client did not declare a capability a question
    needs (none is asked then), ``TimeoutError`` after ``timeout`` seconds.

    Under 2026-07-28 the call ends here with an input-required result when an answer is still
    missing, and the client's retry **runs the script again from the start**, answering its
    questions from what the client sent: ask before doing anything with side effects.
    """
    if not isinstance(requests, dict) or not requests:
        raise ValueError("ask: give a non-empty dict of key -> question")
    questions = {}
    for key, question in requests.items():
        if not isinstance(key, str) or not key:
            raise ValueError("ask: keys must be non-empty strings")
        if not isinstance(question, dict) or "method" not in question:
            raise ValueError("ask: %r is not a question (build it with elicit_request, "
                             "sample_request or roots_request)" % key)
        questions[key] = question
    params = {"requests": questions}
    if timeout is not None:
        params["timeout_s"] = float(timeout)
    # The server bounds the wait itself (timeout_s, else the tool's own time limit); the
    # local wait only guards against a server that never answers.
    local = None if timeout is None else float(timeout) + 5.0
    answer = request("ask", params, timeout=local) or {}
    return answer.get("responses") or {}


def _ask_one(question, key, timeout):
    key = _default_key() if key is None else str(key)
    return ask({key: question}, timeout).get(key)


def sample(messages_or_prompt, max_tokens=1024, timeout=None, key=None, **kw):
    """Asks the client's LLM for a completion (MCP ``sampling/createMessage``).

    ``messages_or_prompt``: a str (one user text message) or a list of MCP sampling messages
    (a str item becomes a user text message). Keyword arguments are further request fields:
    ``system_prompt``, ``temperature``, ``stop_sequences``, ``model_preferences``,
    ``include_context``, ``metadata`` (or their MCP camelCase names). ``key`` names the
    question (default ``q1``, ``q2``, … in asking order; see ``ask``).

    Returns the client's result as a dict: ``{"role", "content", "model", "stopReason"}``;
    the reply text is ``reply["content"]["text"]``. Raises ``RequestError`` when the client
    lacks the ``sampling`` capability or refuses, ``TimeoutError`` after ``timeout`` seconds.
    """
    return _ask_one(sample_request(messages_or_prompt, max_tokens, **kw), key, timeout)


def elicit(message, requested_schema, timeout=None, key=None):
    """Asks the user for input through the client (MCP ``elicitation/create``, form mode).

    ``requested_schema``: the form's JSON schema (an object schema of primitive properties,
    with defaults and enum forms as MCP allows); it is sent unchanged. ``key`` names the
    question (default ``q1``, ``q2``, … in asking order; see ``ask``).

    Returns the client's result as a dict: ``{"action": "accept"|"decline"|"cancel",
    "content": {...}}`` (content only with accept). Raises ``RequestError`` when the client
    lacks the ``elicitation`` capability, ``TimeoutError`` after ``timeout`` seconds.
    """
    return _ask_one(elicit_request(message, requested_schema), key, timeout)


def roots(timeout=None, key=None):
    """The client's roots (MCP ``roots/list``): a list of ``{"uri", "name"?}`` dicts.

    ``key`` names the question (default ``q1``, ``q2``, … in asking order; see ``ask``).
    Raises ``RequestError`` when the client lacks the ``roots`` capability.
    """
    answer = _ask_one(roots_request(), key, timeout) or {}
    return answer.get("roots", [])


def close_sse_stream(retry_ms=None):
    """Over Streamable HTTP, closes the SSE stream of this call's POST now (SEP-1699 polling).

    The client reconnects after ``retry_ms`` milliseconds (default: the server's SSE retry
    interval) with ``Last-Event-ID`` and receives the rest of the call, result included.
    Returns True when a stream was closed, False where there is none (stdio, stateless HTTP,
    a script run by hand).
    """
    if _channel is None:
        return False
    params = {}
    if retry_ms is not None:
        params["retry_ms"] = int(retry_ms)
    answer = request("close_sse_stream", params, timeout=30.0) or {}
    return bool(answer.get("closed"))


def call_builtin(name, arguments=None, timeout=600.0):
    """Runs one OmniForge authoring built-in (e.g. ``omniforge_update_tool``) for this call's
    caller, with the caller's own permissions, and returns its result as a dict
    (``content``, ``isError``, ``structuredContent``).

    The tool's code must declare every built-in it calls in its PEP 723 block::

        # /// script
        # [tool.omniforge]
        # builtins = ["omniforge_update_tool"]
        # ///

    Secret built-ins, ``omniforge_call_tool`` and ``omniforge_test_tool`` cannot be called.
    Raises ``RequestError`` when the built-in may not be called.
    """
    return request("call_builtin", {"name": str(name), "arguments": arguments or {}}, timeout=timeout)


def client_capabilities():
    """The capabilities the client that called this tool declared, as a dict.

    Under protocol revision 2026-07-28 those of this very request (its ``_meta``), under
    earlier revisions those of the session's ``initialize``; ``{}`` when unknown (a script
    run by hand or from the command line). A tool can adapt to it, for example ask for
    sampling only where ``"sampling" in omniforge.client_capabilities()``.
    """
    if _channel is None:
        return {}
    answer = request("client_capabilities", {}, timeout=30.0) or {}
    return answer.get("capabilities") or {}


def start_task():
    """Makes this call its task now (MCP Tasks extension), for a tool with ``taskStart: "script"``.

    The client gets the task at once and the rest of the script runs as it: its result is the
    task's result, and later questions (``elicit``, ``ask``, ...) wait for the client's
    ``tasks/update``. Questions asked before are input-required rounds of the request (the
    script runs again from the start each round), so ask first, then start the task, then
    work. Where no task can start (a client without the extension, a tool that does not allow
    tasks, ``taskStart: "call"``, a script run by hand) it does nothing. Returns True when the
    call runs as a task from now on. Raises ``RequestError`` when the task could not be
    created.
    """
    if _channel is None:
        return False
    answer = request("start_task", {}, timeout=60.0) or {}
    return bool(answer.get("task"))


# The JSON-RPC error codes a script may end its call with (``protocol_error``).
PROTOCOL_ERROR_CODES = (-32021, -32602, -32603)


def protocol_error(code, message, data=None):
    """Ends the call with a JSON-RPC error instead of a tool result; does not return.

    ``code``: -32021 (a client capability the request did not declare; ``data`` should be
    ``{"requiredCapabilities": {"sampling": {}}}``), -32602 (invalid params) or -32603
    (internal error). Any other code makes the call a tool error result instead. Secret
    values in ``message`` and ``data`` are redacted like every result.
    """
    params = {"code": int(code), "message": str(message)}
    if data is not None:
        params["data"] = data
    if _channel is None:
        sys.stderr.write("protocol_error: %s\n" % json.dumps(params, default=str))
        raise SystemExit(1)
    request("protocol_error", params, timeout=30.0)
    sys.stdout.flush()
    raise SystemExit(0)
