"""A JSON-RPC layer that answers bad input instead of dropping it.

pygls logs and drops a message it cannot decode or structure, so a client waiting for that
request's answer waits forever. Here every request gets an answer: malformed JSON gets a
ParseError (id null), a message that is not a JSON-RPC object gets InvalidRequest, a request
whose params do not fit the method gets InvalidParams with its id, a request before
``initialize`` gets ServerNotInitialized, and one after ``shutdown`` gets InvalidRequest.
The server stays up through all of it.
"""

from __future__ import annotations

import hmac
import logging
from typing import Any

from lsprotocol import types
from pygls.exceptions import JsonRpcException
from pygls.protocol import LanguageServerProtocol
from pygls.protocol.language_server import lsp_method

log = logging.getLogger(__name__)


class BadMessage(Exception):
    """A message that deserves an error response (raised out of decoding, answered by the server)."""

    def __init__(self, msg_id: int | str | None, code: int, message: str):
        super().__init__(message)
        self.msg_id = msg_id
        self.code = code


def _valid_id(value: Any) -> int | str | None:
    return value if isinstance(value, (int, str)) and not isinstance(value, bool) else None


class InfillProtocol(LanguageServerProtocol):
    """pygls' LSP protocol, hardened against malformed and out-of-order messages."""

    required_token: str | None = None  # if set, initialize must carry initializationOptions.token

    def reset(self) -> None:
        """Forget the session (a TCP client went away): the next client starts with initialize."""
        for future in list(self._request_futures.values()):
            future.cancel()
        self._request_futures.clear()
        self._workspace = None
        self._shutdown = False

    @lsp_method(types.INITIALIZE)
    def lsp_initialize(self, params: types.InitializeParams):
        """pygls' initialize, plus the server's ``capabilities.experimental`` (the languages its
        model knows: ``experimental.infill``)."""
        result = yield from super().lsp_initialize(params)
        extra = getattr(self._server, "experimental_capabilities", None)
        if extra is not None:
            result.capabilities.experimental = extra()
        return result

    def structure_message(self, data: dict[str, Any]):
        try:
            return super().structure_message(data)
        except JsonRpcException as exc:
            if "method" in data and "id" in data:
                code = types.ErrorCodes.InvalidParams if "params" in data else types.ErrorCodes.InvalidRequest
                raise BadMessage(_valid_id(data.get("id")), code, f"invalid message for {data.get('method')!r}: {exc}") from None
            if "id" in data and "result" not in data and "error" not in data:
                raise BadMessage(_valid_id(data.get("id")), types.ErrorCodes.InvalidRequest, "invalid request") from None
            raise

    def handle_message(self, message: Any):
        if not hasattr(message, "jsonrpc"):  # a raw dict without "jsonrpc", a list, a number, ...
            if isinstance(message, dict) and "method" not in message and ("result" in message or "error" in message):
                log.warning("dropping a response without 'jsonrpc'")
                return
            msg_id = _valid_id(message.get("id")) if isinstance(message, dict) else None
            raise BadMessage(msg_id, types.ErrorCodes.InvalidRequest, "not a JSON-RPC 2.0 message")
        method = getattr(message, "method", None)
        msg_id = getattr(message, "id", None)
        is_request = method is not None and msg_id is not None
        if message.jsonrpc != self.VERSION:
            if is_request:
                raise BadMessage(_valid_id(msg_id), types.ErrorCodes.InvalidRequest, "jsonrpc must be '2.0'")
            return
        if not isinstance(method, (str, type(None))):
            raise BadMessage(_valid_id(msg_id), types.ErrorCodes.InvalidRequest, "method must be a string")
        if is_request and self._workspace is None and method != types.INITIALIZE:
            raise BadMessage(msg_id, types.ErrorCodes.ServerNotInitialized, "the server is not initialized yet")
        if is_request and method == types.INITIALIZE and self.required_token is not None:
            init = getattr(message.params, "initialization_options", None)
            given = init.get("token") if isinstance(init, dict) else None
            if not isinstance(given, str) or not hmac.compare_digest(given, self.required_token):
                raise BadMessage(msg_id, types.ErrorCodes.InvalidRequest, "initializationOptions.token is missing or wrong")
        if is_request and self._shutdown and method != types.EXIT:
            raise BadMessage(msg_id, types.ErrorCodes.InvalidRequest, "the server is shutting down")
        if method is not None and msg_id is None and self._workspace is None and method not in (
            types.INITIALIZED, types.EXIT, types.CANCEL_REQUEST,
        ):
            log.warning("dropping notification %r before initialize", method)
            return
        super().handle_message(message)

    def answer_bad_message(self, error: Exception) -> bool:
        """Answer a decoding failure reported by the read loop; False if it is not one."""
        if isinstance(error, BadMessage):
            code, msg_id, text = error.code, error.msg_id, str(error)
        elif isinstance(error, ValueError):  # json.JSONDecodeError, UnicodeDecodeError
            code, msg_id, text = types.ErrorCodes.ParseError, None, f"parse error: {error}"
        else:
            return False
        log.warning("bad message (%s): %s", int(code), text[:200])
        self._send_data({"jsonrpc": "2.0", "id": msg_id, "error": {"code": int(code), "message": text[:500]}})
        return True
