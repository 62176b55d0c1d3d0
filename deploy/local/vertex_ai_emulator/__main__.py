"""`python -m vertex_ai_emulator`: the same as the `vertex-ai-emulator` command."""

from vertex_ai_emulator.cli import run

run()
