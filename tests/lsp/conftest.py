"""Fixtures for the language server tests: a pytest-lsp client talking to ``python -m infill.lsp``
over stdio, with the tiny random model (``tiny_model_dir`` from tests/conftest.py)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest_lsp
from lsprotocol import types
from pytest_lsp import ClientServerConfig, LanguageClient

REPO = Path(__file__).resolve().parents[2]
SERVER = [sys.executable, "-m", "infill.lsp", "--device", "cpu", "--threads", "1", "--precision", "fp32"]  # as tiny_engine: the same fills

# Fast settings for the tiny model: small windows, two denoising steps, no debounce.
FAST = {"maxTokens": 8, "steps": 2, "debounceMs": 0, "device": "cpu"}


def capabilities() -> types.ClientCapabilities:
    return types.ClientCapabilities(
        window=types.WindowClientCapabilities(work_done_progress=True),
        text_document=types.TextDocumentClientCapabilities(
            inline_completion=types.InlineCompletionClientCapabilities(),
            completion=types.CompletionClientCapabilities(),
            code_action=types.CodeActionClientCapabilities(),
        ),
        workspace=types.WorkspaceClientCapabilities(apply_edit=False, configuration=False),
    )


@pytest_lsp.fixture(
    scope="module",
    config=ClientServerConfig(server_command=SERVER, server_env=None),
)
async def client(lsp_client: LanguageClient, tiny_model_dir, tmp_path_factory):
    feedback = tmp_path_factory.mktemp("feedback") / "feedback.json"
    options = {**FAST, "modelPath": str(tiny_model_dir), "feedbackFile": str(feedback)}
    lsp_client.init_options = options
    lsp_client.feedback_file = feedback
    result = await lsp_client.initialize_session(
        types.InitializeParams(capabilities=capabilities(), initialization_options=options,
                               root_uri=REPO.as_uri())
    )
    lsp_client.init_result = result
    yield
    await lsp_client.shutdown_session()
