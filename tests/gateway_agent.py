#!/usr/bin/env python3
"""A stand-in Claude Code: calls the model through ``ANTHROPIC_BASE_URL``, prints ``stream-json``.

Standard library only (it runs inside the sandbox, under ``--isolation os`` too).
It reads the prompt on stdin and loops like Claude Code ``-p``: each turn POSTs
``/v1/messages`` (streaming) with the ``Write`` and ``Bash`` tools and
``x-api-key: $ANTHROPIC_API_KEY``, prints the answer as an ``assistant`` event,
runs the tool calls it asked for and prints each ``tool_result`` as a ``user``
event, until the model stops asking; then it prints a ``result`` event with the
usage it counted (and ``modelUsage``) and exits 0. An answer that is no 200 ends
it with an error ``result`` and exit 1; a broken stream, with exit 1.

``SIGUSR1`` makes it exit 0 at once: the stand-in for an agent that ptrace-injected
an exit into its host (issue 22).
"""

from __future__ import annotations

import http.client
import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

TOOLS = [
    {
        "name": "Write",
        "description": "Write a file",
        "input_schema": {"type": "object", "properties": {"file_path": {}, "content": {}}},
    },
    {
        "name": "Bash",
        "description": "Run a shell command",
        "input_schema": {"type": "object", "properties": {"command": {}, "description": {}}},
    },
]
MAX_TURNS = 30


def emit(event: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(event) + "\n")
    sys.stdout.flush()


def call(messages: list[dict[str, Any]]) -> tuple[int, dict[str, Any], str]:
    """POST one streaming request; return the status, the assembled message, the error text."""
    base = urlsplit(os.environ["ANTHROPIC_BASE_URL"])
    connection = http.client.HTTPConnection(base.hostname or "127.0.0.1", base.port, timeout=600)
    body = {
        "model": os.environ.get("STANDIN_MODEL", "mock-model"),
        "max_tokens": 4096,
        "stream": True,
        "system": f"Primary working directory: {Path.cwd()}",
        "tools": TOOLS,
        "messages": messages,
    }
    headers = {
        "content-type": "application/json",
        "x-api-key": os.environ.get("ANTHROPIC_API_KEY", ""),
        "anthropic-version": "2023-06-01",
    }
    connection.request("POST", f"{base.path.rstrip('/')}/v1/messages", json.dumps(body), headers)
    response = connection.getresponse()
    if response.status != 200:
        return response.status, {}, response.read().decode("utf-8", "replace")
    return 200, read_message(response), ""


def read_message(response: http.client.HTTPResponse) -> dict[str, Any]:
    """Assemble the streamed message (raises when the stream breaks off)."""
    message: dict[str, Any] = {"content": [], "usage": {}}
    blocks: dict[int, dict[str, Any]] = {}
    pieces: dict[int, str] = {}
    for raw in response:
        line = raw.decode("utf-8").strip()
        if not line.startswith("data:"):
            continue
        event = json.loads(line[5:])
        kind = event.get("type")
        if kind == "message_start":
            start = event["message"]
            message.update(id=start["id"], model=start.get("model"), usage=dict(start["usage"]))
        elif kind == "content_block_start":
            blocks[event["index"]] = dict(event["content_block"])
        elif kind == "content_block_delta":
            add_delta(blocks[event["index"]], pieces, event["index"], event["delta"])
        elif kind == "message_delta":
            message["usage"].update(event.get("usage") or {})
            message["stop_reason"] = event["delta"].get("stop_reason")
        elif kind == "message_stop":
            break
    else:
        raise ConnectionError("the stream ended before message_stop")
    for index in sorted(blocks):
        block = blocks[index]
        if block.get("type") == "tool_use" and index in pieces:
            block["input"] = json.loads(pieces[index])
        message["content"].append(block)
    return message


def add_delta(
    block: dict[str, Any], pieces: dict[int, str], index: int, delta: dict[str, Any]
) -> None:
    """Add one content delta to its block (tool input pieces are joined at the end)."""
    if delta.get("type") == "input_json_delta":
        pieces[index] = pieces.get(index, "") + delta["partial_json"]
    elif delta.get("type") == "text_delta":
        block["text"] = block.get("text", "") + delta["text"]


def run_tool(block: dict[str, Any]) -> tuple[str, bool]:
    arguments = block.get("input") or {}
    if block["name"] == "Write":
        path = Path(arguments["file_path"])
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(arguments["content"], encoding="utf-8")
        return f"wrote {path}", False
    if block["name"] == "Bash":
        done = subprocess.run(  # noqa: S602 - the stand-in's shell tool runs a shell command
            arguments["command"], shell=True, capture_output=True, text=True, check=False
        )
        return (done.stdout + done.stderr)[-4000:], done.returncode != 0
    return f"no tool {block['name']}", True


def main() -> int:
    signal.signal(signal.SIGUSR1, lambda *_: os._exit(0))
    prompt = sys.stdin.read()
    emit({"type": "system", "subtype": "init", "model": "mock-model", "tools": ["Write", "Bash"]})
    messages: list[dict[str, Any]] = [{"role": "user", "content": prompt}]
    totals = {"input_tokens": 0, "output_tokens": 0, "cache_read_input_tokens": 0,
              "cache_creation_input_tokens": 0}  # fmt: skip
    turns = 0
    text = ""
    for _ in range(MAX_TURNS):
        turns += 1
        try:
            status, message, error = call(messages)
        except (OSError, http.client.HTTPException, ValueError) as exc:
            sys.stderr.write(f"model call failed: {exc}\n")
            return 1
        if status != 200:
            emit({"type": "result", "subtype": "success", "is_error": True, "num_turns": turns,
                  "api_error_status": status, "result": error})  # fmt: skip
            return 1
        for key in totals:
            totals[key] += int(message["usage"].get(key) or 0)
        emit({"type": "assistant", "message": message})
        messages.append({"role": "assistant", "content": message["content"]})
        calls = [b for b in message["content"] if b.get("type") == "tool_use"]
        text = " ".join(b.get("text", "") for b in message["content"] if b.get("type") == "text")
        if not calls:
            break
        results = []
        for block in calls:
            output, failed = run_tool(block)
            results.append({"type": "tool_result", "tool_use_id": block["id"], "content": output,
                            "is_error": failed})  # fmt: skip
        emit({"type": "user", "message": {"role": "user", "content": results}})
        messages.append({"role": "user", "content": results})
    names = {"input_tokens": "inputTokens", "output_tokens": "outputTokens",
             "cache_read_input_tokens": "cacheReadInputTokens",
             "cache_creation_input_tokens": "cacheCreationInputTokens"}  # fmt: skip
    model_usage = {"mock-model": {names[key]: value for key, value in totals.items()}}
    emit({"type": "result", "subtype": "success", "is_error": False, "num_turns": turns,
          "usage": totals, "modelUsage": model_usage, "total_cost_usd": 0.001 * turns,
          "result": text})  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
