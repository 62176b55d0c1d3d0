"""emulator_stack: the local Google Cloud emulators, started on free ports and always stopped.

Pub/Sub and Firestore (Google's emulators), Cloud Storage (``gcp-storage-emulator``) and Vertex AI
(this project's emulator), each run as a subprocess in its own process group. Used by the test
fixtures (``tests/conftest.py``), by ``python -m emulator_stack`` and by the local demo.

    with start_emulators(["pubsub", "firestore"], log_dir) as stack, scoped_environ(stack.env):
        ...  # client libraries built here talk to the emulators
"""

from emulator_stack.environment import LOCAL_PROJECT, scoped_environ
from emulator_stack.errors import EmulatorStackError, EmulatorStartError, PrerequisiteMissing
from emulator_stack.firestore import FirestoreEmulator, start_firestore_emulator
from emulator_stack.handle import EmulatorHandle
from emulator_stack.process import ManagedProcess
from emulator_stack.pubsub import PubSubEmulator, start_pubsub_emulator
from emulator_stack.stack import LAUNCHERS, EmulatorStack, start_emulators
from emulator_stack.storage import StorageEmulator, start_storage_emulator
from emulator_stack.vertex_ai import (
    VertexAIEmulator,
    start_vertex_ai_emulator,
    vertex_ai_emulator_available,
)

__all__ = [
    "LAUNCHERS",
    "LOCAL_PROJECT",
    "EmulatorHandle",
    "EmulatorStack",
    "EmulatorStackError",
    "EmulatorStartError",
    "FirestoreEmulator",
    "ManagedProcess",
    "PrerequisiteMissing",
    "PubSubEmulator",
    "StorageEmulator",
    "VertexAIEmulator",
    "scoped_environ",
    "start_emulators",
    "start_firestore_emulator",
    "start_pubsub_emulator",
    "start_storage_emulator",
    "start_vertex_ai_emulator",
    "vertex_ai_emulator_available",
]
