#!/usr/bin/env python3
"""E2E driver: the official Python MCP SDK 2.x with its OAuth client support.

    python oauth_client.py client-credentials URL --issuer ISSUER --client-id ID --client-secret SECRET
                           [--call TOOL JSON_ARGS]... [--print-token]
    python oauth_client.py authorization-code URL --issuer ISSUER --client-id ID
                           [--login NAME] [--redirect-uri URI] [--call TOOL JSON_ARGS]... [--print-token]

URL is the MCP endpoint (e.g. http://127.0.0.1:PORT/mcp) of a server that answers 401 and
publishes RFC 9728 protected-resource metadata. The SDK's own OAuth client runs the whole flow:
the first MCP request gets 401; the SDK reads `resource_metadata` (and `scope`) from
WWW-Authenticate, fetches the protected-resource metadata, then the authorization server's
metadata (RFC 8414, falling back to OpenID discovery), and gets a token for the resource
(RFC 8707 `resource` parameter):
- `client-credentials`: `ClientCredentialsOAuthProvider` (client_secret_basic).
- `authorization-code`: `OAuthClientProvider` with PKCE (S256) and a pre-registered public
  client. Its redirect handler plays the browser: it opens the authorization URL and scripts
  the authorization server's own interaction pages with plain HTTP (oidc-provider's sign-in
  form: any login and password; then its consent form), and stops at the redirect back to
  `--redirect-uri`, whose `code`, `state` and `iss` its callback handler returns.
Then: initialize, tools/list, and each `--call` in order.

Machine-readable lines on stdout, one per step (tokens are never printed unless --print-token):

    HTTP {"method", "url", "status", "www_authenticate"?}   every HTTP exchange, in order
    AUTHORIZE {"url": authorization URL, "pages": [prompt names scripted]}  (authorization-code)
    TOKEN {"scope", "expires_in", "token_type", "claims": JWT payload or null, "token"?}
    INIT {"protocolVersion", "serverInfo"}
    TOOLS ["name", ...]
    CALL {"tool": NAME, "result": CallToolResult, camelCase}
    DONE

Diagnostics go to stderr. Exit 0 only if every step worked; 2 = bad usage or a check failed,
4 = an exception (for example the OAuth flow failed).
"""
import argparse
import base64
import json
import re
import sys
import traceback
from html import unescape
from urllib.parse import parse_qs, urljoin, urlparse

import anyio
import httpx2
from mcp import ClientSession
from mcp.client.auth import OAuthClientProvider, TokenStorage
from mcp.client.auth.extensions.client_credentials import ClientCredentialsOAuthProvider
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import AuthorizationCodeResult, OAuthClientInformationFull, OAuthClientMetadata, OAuthToken

STEP_TIMEOUT = 30  # seconds for one MCP request (the first one includes the OAuth flow)


def out(tag, payload=None):
    print(tag if payload is None else f"{tag} {json.dumps(payload)}", flush=True)


def log(text):
    print(f"oauth driver: {text}", file=sys.stderr, flush=True)


class DriverFail(Exception):
    pass


def find_fail(exc):
    """The DriverFail in `exc`, also inside (nested) exception groups."""
    if isinstance(exc, DriverFail):
        return exc
    for inner in getattr(exc, "exceptions", ()):
        found = find_fail(inner)
        if found is not None:
            return found
    return None


class MemoryStorage(TokenStorage):
    """Tokens and client information for one run, in memory."""

    def __init__(self, client_info=None):
        self.tokens = None
        self.client_info = client_info

    async def get_tokens(self):
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken):
        self.tokens = tokens

    async def get_client_info(self):
        return self.client_info

    async def set_client_info(self, client_info: OAuthClientInformationFull):
        self.client_info = client_info


def jwt_claims(token):
    """The payload of a JWT, unverified (for the test to look at), or None for opaque tokens."""
    parts = token.split(".")
    if len(parts) != 3:
        return None
    try:
        return json.loads(base64.urlsafe_b64decode(parts[1] + "=" * (-len(parts[1]) % 4)))
    except ValueError:
        return None


# --- The scripted browser for the authorization-code flow ---------------------------------------
FORM_RE = re.compile(r"<form\b[^>]*\baction=\"([^\"]+)\"[^>]*>(.*?)</form>", re.S | re.I)
HIDDEN_RE = re.compile(r"<input\b[^>]*type=\"hidden\"[^>]*name=\"([^\"]+)\"[^>]*value=\"([^\"]*)\"", re.I)


async def sign_in(authorization_url, redirect_uri, login, password, pages):
    """Follows the authorization request through the provider's sign-in and consent pages until
    it redirects to `redirect_uri`; returns that redirect's query parameters."""
    async with httpx2.AsyncClient(follow_redirects=False, trust_env=False, timeout=15) as browser:
        response = await browser.get(authorization_url)
        for _ in range(20):
            if response.status_code in (302, 303):
                location = urljoin(str(response.url), response.headers["location"])
                if location.split("?")[0] == redirect_uri.split("?")[0]:
                    return parse_qs(urlparse(location).query)
                response = await browser.get(location)
                continue
            if response.status_code != 200:
                raise DriverFail(f"authorization server answered {response.status_code} at {response.url}: "
                                 f"{response.text[:500]}")
            forms = [(action, body) for action, body in FORM_RE.findall(response.text)
                     if 'name="prompt"' in body]
            if not forms:
                raise DriverFail(f"no interaction form at {response.url}: {response.text[:500]}")
            action, body = forms[0]
            fields = {name: unescape(value) for name, value in HIDDEN_RE.findall(body)}
            prompt = fields.get("prompt")
            if prompt == "login":
                fields.update(login=login, password=password)
            elif prompt != "consent":
                raise DriverFail(f"unexpected interaction prompt {prompt!r} at {response.url}")
            pages.append(prompt)
            response = await browser.post(urljoin(str(response.url), unescape(action)), data=fields)
        raise DriverFail("the authorization request did not come back to the redirect URI within 20 steps")


def authorization_code_provider(args, storage):
    result = {}

    async def redirect_handler(authorization_url):
        pages = []
        params = await sign_in(authorization_url, args.redirect_uri, args.login, args.password, pages)
        out("AUTHORIZE", {"url": authorization_url, "pages": pages})
        if "error" in params:
            raise DriverFail(f"authorization failed: {params}")
        result.update({k: v[0] for k, v in params.items()})

    async def callback_handler():
        return AuthorizationCodeResult(code=result["code"], state=result.get("state"), iss=result.get("iss"))

    storage.client_info = OAuthClientInformationFull(
        client_id=args.client_id,
        token_endpoint_auth_method="none",
        redirect_uris=[args.redirect_uri],
        grant_types=["authorization_code", "refresh_token"],
        response_types=["code"],
    )
    metadata = OAuthClientMetadata(
        client_name="omniforge-e2e",
        redirect_uris=[args.redirect_uri],
        grant_types=["authorization_code", "refresh_token"],
        response_types=["code"],
        token_endpoint_auth_method="none",
    )
    return OAuthClientProvider(args.url, metadata, storage, redirect_handler, callback_handler)


async def main(args):
    storage = MemoryStorage()
    if args.flow == "client-credentials":
        if not args.client_secret:
            raise DriverFail("client-credentials needs --client-secret")
        auth = ClientCredentialsOAuthProvider(
            args.url, storage, args.client_id, args.client_secret, issuer=args.issuer,
        )
    else:
        auth = authorization_code_provider(args, storage)

    async def record(response):
        entry = {"method": response.request.method, "url": str(response.request.url), "status": response.status_code}
        if "www-authenticate" in response.headers:
            entry["www_authenticate"] = response.headers["www-authenticate"]
        out("HTTP", entry)

    http = httpx2.AsyncClient(
        auth=auth,
        trust_env=False,
        timeout=httpx2.Timeout(30, read=300),
        event_hooks={"response": [record]},
    )
    async with http, streamable_http_client(args.url, http_client=http) as streams:
        async with ClientSession(streams[0], streams[1]) as session:
            with anyio.fail_after(STEP_TIMEOUT):
                init = await session.initialize()
            init = init.model_dump(by_alias=True, mode="json", exclude_none=True)
            token = storage.tokens
            if token is None:
                raise DriverFail("initialize succeeded without the OAuth flow storing a token")
            info = {
                "scope": token.scope,
                "expires_in": token.expires_in,
                "token_type": token.token_type,
                "claims": jwt_claims(token.access_token),
            }
            if args.print_token:
                info["token"] = token.access_token
            out("TOKEN", info)
            out("INIT", {"protocolVersion": init.get("protocolVersion"), "serverInfo": init.get("serverInfo")})

            with anyio.fail_after(STEP_TIMEOUT):
                tools = await session.list_tools()
            out("TOOLS", [t.name for t in tools.tools])

            for name, arguments in args.call or []:
                try:
                    arguments = json.loads(arguments)
                except ValueError as e:
                    raise DriverFail(f"--call {name}: arguments are not JSON: {e}") from e
                with anyio.fail_after(STEP_TIMEOUT):
                    result = await session.call_tool(name, arguments)
                out("CALL", {"tool": name, "result": result.model_dump(by_alias=True, mode="json", exclude_none=True)})
    out("DONE")


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("flow", choices=["client-credentials", "authorization-code"])
    p.add_argument("url", help="the MCP endpoint")
    p.add_argument("--issuer", required=True, help="the authorization server the credentials belong to")
    p.add_argument("--client-id", required=True)
    p.add_argument("--client-secret")
    p.add_argument("--login", default="alice", help="the name to sign in with (authorization-code)")
    p.add_argument("--password", default="any", help="the password to sign in with (authorization-code)")
    p.add_argument("--redirect-uri", default="http://127.0.0.1/callback",
                   help="the registered redirect URI; never contacted, the flow stops at the redirect")
    p.add_argument("--call", nargs=2, action="append", metavar=("TOOL", "JSON_ARGS"))
    p.add_argument("--print-token", action="store_true", help="include the access token in the TOKEN line")
    return p.parse_args(argv)


if __name__ == "__main__":
    arguments = parse_args(sys.argv[1:])
    try:
        anyio.run(main, arguments)
    except BaseException as exc:  # noqa: BLE001 - report everything, exit non-zero
        failure = find_fail(exc)
        if failure is None:
            traceback.print_exc()
            log("FAIL: exception")
            sys.exit(4)
        log(f"FAIL: {failure}")
        sys.exit(2)
