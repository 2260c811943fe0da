"""Web search from inside an a2rl sandbox, through the server.

The sandbox has no network. A run whose budget allows search queries gets a Unix socket to its server
($A2RL_SEARCH_SOCKET); the server asks its provider (SerpAPI, DuckDuckGo, a local corpus), caches the answer,
and counts every query against the run's budget (budget_status shows what is left).

    from a2rl_search import search, observation
    search("capital of France")          # [{"title": ..., "snippet": ..., "url": ...}, ...]
    observation("capital of France")     # the top snippets joined by " | ", as DeepSearchQA's reference shows them
"""

import http.client
import json
import os
import socket

__all__ = ["SearchError", "search", "observation"]

DEFAULT_TOP_K = 3


class SearchError(RuntimeError):
    """The server refused or could not answer a query: the message says why and what to do ("[CODE] ...")."""

    def __init__(self, message, status=None):
        super().__init__(message)
        self.status = status


class _UnixConnection(http.client.HTTPConnection):
    def __init__(self, path, timeout):
        super().__init__("localhost", timeout=timeout)
        self._path = path

    def connect(self):
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(self.timeout)
        sock.connect(self._path)
        self.sock = sock


def _socket_path():
    path = os.environ.get("A2RL_SEARCH_SOCKET")
    if not path:
        raise SearchError("This run has no search channel (A2RL_SEARCH_SOCKET is unset): its budget allows no search queries.")
    return path


def search(query, top_k=DEFAULT_TOP_K, timeout=30.0):
    """At most top_k results for query, each a dict with title, snippet and url. Raises SearchError."""
    path = _socket_path()
    body = json.dumps({"query": query, "top_k": top_k})
    connection = _UnixConnection(path, timeout)
    try:
        connection.request("POST", "/search", body=body, headers={"content-type": "application/json"})
        response = connection.getresponse()
        payload = json.loads(response.read().decode("utf-8"))
    except (OSError, http.client.HTTPException, ValueError) as error:
        raise SearchError(f"The search channel at {path} did not answer: {error}") from error
    finally:
        connection.close()
    if response.status != 200:
        raise SearchError(payload.get("error", f"HTTP {response.status}"), response.status)
    return payload["results"]


def observation(query, top_k=DEFAULT_TOP_K):
    """The results' snippets joined by " | ", or "No results found.": the text a ReAct step sees."""
    snippets = [result["snippet"] for result in search(query, top_k) if result["snippet"]]
    return " | ".join(snippets) or "No results found."
